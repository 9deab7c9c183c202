#include "net/request_reader.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <string>

namespace tandem::net::internal {
namespace {

HttpServerOptions SmallLimits() {
  HttpServerOptions options;
  options.max_header_bytes = 256;
  options.max_body_bytes = 16;
  return options;
}

TEST(RequestReaderTest, ReadsARequestWhateverTheReadSize) {
  const std::string bytes =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nX-Request-Id: r1\r\n"
      "Content-Length: 11\r\n\r\n{\"prompt\":1}next";
  for (size_t chunk : {0, 1, 3, 64}) {
    BytesRead read = ReadRequestFromBytes(bytes, HttpServerOptions(), chunk);
    ASSERT_TRUE(read.ok) << chunk << ": " << read.failure.message;
    EXPECT_EQ(read.request.method, "POST");
    EXPECT_EQ(read.request.path(), "/v1/completions");
    EXPECT_EQ(read.request.query(), "x=1");
    EXPECT_EQ(read.request.version, 11);
    EXPECT_EQ(read.request.headers.GetOr("x-request-id", ""), "r1");
    EXPECT_EQ(read.request.body, "{\"prompt\":1");
    EXPECT_TRUE(read.keep_alive);
    // The pipelined "}next" is left for the next request.
    EXPECT_EQ(read.consumed, bytes.size() - 5) << chunk;
  }
}

TEST(RequestReaderTest, ChunkedBodyAndHttp10) {
  BytesRead read = ReadRequestFromBytes(
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      HttpServerOptions(), 2);
  ASSERT_TRUE(read.ok) << read.failure.message;
  EXPECT_EQ(read.request.body, "abcde");

  read = ReadRequestFromBytes("GET / HTTP/1.0\r\n\r\n", HttpServerOptions());
  ASSERT_TRUE(read.ok);
  EXPECT_EQ(read.request.version, 10);
  EXPECT_FALSE(read.keep_alive);
}

TEST(RequestReaderTest, LimitsAndMalformedRequestsGetTheirStatus) {
  BytesRead read = ReadRequestFromBytes(
      "POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n01234567890123456", SmallLimits());
  EXPECT_FALSE(read.ok);
  EXPECT_EQ(read.failure.status, 413);
  EXPECT_NE(read.failure.message.find("16 bytes"), std::string::npos) << read.failure.message;

  // A chunked body over the limit is refused as it arrives.
  read = ReadRequestFromBytes(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n01234567890123456\r\n0\r\n\r\n",
      SmallLimits(), 4);
  EXPECT_EQ(read.failure.status, 413);

  read = ReadRequestFromBytes("GET / HTTP/1.1\r\nX-Big: " + std::string(300, 'a') + "\r\n\r\n",
                              SmallLimits(), 7);
  EXPECT_EQ(read.failure.status, 431);

  for (const char* malformed :
       {"GET / FTP/1.1\r\n\r\n", "GET\r\n\r\n", "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}) {
    read = ReadRequestFromBytes(malformed, HttpServerOptions());
    EXPECT_EQ(read.failure.status, 400) << malformed;
    EXPECT_NE(read.failure.message.find("malformed HTTP request"), std::string::npos);
  }
}

TEST(RequestReaderTest, AClientThatGoesAwayGetsNoAnswer) {
  for (const char* cut : {"", "GET / HT", "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"}) {
    BytesRead read = ReadRequestFromBytes(cut, HttpServerOptions(), 2);
    EXPECT_FALSE(read.ok) << cut;
    EXPECT_EQ(read.failure.status, 0) << cut;
  }
}

TEST(RequestReaderTest, ExpectContinue) {
  RequestParser parser;
  ApplyRequestLimits(HttpServerOptions(), &parser);
  std::string head = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n";
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(head), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_header_done());
  EXPECT_TRUE(WantsContinue(parser));
}

}  // namespace
}  // namespace tandem::net::internal
