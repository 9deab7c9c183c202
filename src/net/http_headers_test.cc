#include "net/http_headers.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "net/http_request.h"
#include "net/openai_error.h"
#include "net/url.h"

namespace tandem::net {
namespace {

TEST(HttpHeadersTest, LookupIgnoresCase) {
  HttpHeaders h{{"Content-Type", "text/plain"}};
  h.Add("X-Thing", "1");
  h.Add("x-thing", "2");
  EXPECT_EQ(h.Get("content-type").value(), "text/plain");
  EXPECT_EQ(h.Get("X-THING").value(), "1");
  EXPECT_FALSE(h.Get("missing").has_value());
  EXPECT_EQ(h.GetOr("missing", "dflt"), "dflt");
  h.Set("X-Thing", "3");
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h.Get("x-thing").value(), "3");
  h.Remove("CONTENT-TYPE");
  EXPECT_FALSE(h.Has("Content-Type"));
}

TEST(HttpRequestTest, PathAndQuery) {
  HttpRequest r;
  r.target = "/v1/models?limit=3&x=y";
  EXPECT_EQ(r.path(), "/v1/models");
  EXPECT_EQ(r.query(), "limit=3&x=y");
  r.target = "/health";
  EXPECT_EQ(r.path(), "/health");
  EXPECT_EQ(r.query(), "");
}

TEST(OpenAiErrorTest, Shape) {
  auto j = nlohmann::json::parse(OpenAiErrorJson(404, "no route for /x"));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "no route for /x");
  EXPECT_EQ(j["error"]["type"], "NotFoundError");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["code"], 404);
  j = nlohmann::json::parse(OpenAiErrorJson(400, "bad \"quote\"\n", "invalid_request_error", "model"));
  EXPECT_EQ(j["error"]["message"], "bad \"quote\"\n");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  // Invalid UTF-8 must not throw.
  EXPECT_NO_THROW(nlohmann::json::parse(OpenAiErrorJson(400, std::string("\xff\xfe", 2))));
  EXPECT_EQ(HttpReasonPhrase(431), "Request Header Fields Too Large");
}

TEST(UrlTest, Parses) {
  auto u = ParseHttpUrl("http://127.0.0.1:8000/v1/completions?x=1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->target, "/v1/completions?x=1");
  u = ParseHttpUrl("localhost");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  u = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->HostPort(), "[::1]:9000");
  u = ParseHttpUrl("example.com:81?q");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->target, "/?q");
  EXPECT_EQ(ParseHttpUrl("https://x/").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ParseHttpUrl("http://:80/").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("http://h:99999/").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpUrl("ftp://h/").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::net
