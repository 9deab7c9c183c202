#include "net/request_reader.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <cstdint>
#include <limits>
#include <utility>

namespace tandem::net::internal {

namespace http = boost::beast::http;

void ApplyRequestLimits(const HttpServerOptions& options, RequestParser* parser) {
  // Beast takes a 32-bit header limit; larger configured values mean "as large as Beast
  // allows" rather than a silently wrapped small one.
  constexpr size_t kMaxHeaderLimit = std::numeric_limits<uint32_t>::max();
  parser->header_limit(static_cast<uint32_t>(std::min(options.max_header_bytes, kMaxHeaderLimit)));
  parser->body_limit(options.max_body_bytes);
}

bool WantsContinue(const RequestParser& parser) {
  auto expect = parser.get().find(http::field::expect);
  return expect != parser.get().end() && EqualsIgnoreCase(expect->value(), "100-continue");
}

ReadFailure ClassifyReadError(const boost::system::error_code& ec,
                              const HttpServerOptions& options) {
  if (ec == http::error::body_limit) {
    return {413, "request body exceeds the limit of " + std::to_string(options.max_body_bytes) +
                     " bytes"};
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return {431, "request headers exceed the limit of " + std::to_string(options.max_header_bytes) +
                     " bytes"};
  }
  // Any other parse error is a malformed request; the end of the stream before or inside
  // a request is the client going away, which gets no answer (nor do socket errors).
  if (ec.category() == boost::system::error_code(http::error::end_of_stream).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return {400, "malformed HTTP request: " + ec.message()};
  }
  return {};
}

HttpRequest TakeRequest(RequestParser& parser, bool* keep_alive) {
  auto message = parser.release();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.version = message.version();
  for (const auto& field : message) {
    request.headers.Add(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  *keep_alive = message.keep_alive();
  return request;
}

BytesRead ReadRequestFromBytes(std::string_view bytes, const HttpServerOptions& options,
                               size_t chunk_bytes) {
  BytesRead out;
  RequestParser parser;
  ApplyRequestLimits(options, &parser);
  if (chunk_bytes == 0) chunk_bytes = bytes.size() + 1;
  // `pending` is what a connection's read buffer would hold: bytes received but not yet
  // consumed by the parser (Beast keeps an incomplete header there until it is whole).
  size_t received = 0;
  size_t parsed = 0;
  boost::system::error_code ec;
  while (!parser.is_done()) {
    std::string_view pending = bytes.substr(parsed, received - parsed);
    size_t n = pending.empty()
                   ? 0
                   : parser.put(boost::asio::const_buffer(pending.data(), pending.size()), ec);
    parsed += n;
    if (pending.empty() || ec == http::error::need_more || (n == 0 && !ec)) {
      ec = {};
      if (received == bytes.size()) {
        // The peer closed: complete only if nothing is missing. (put_eof requires that
        // the parser saw some bytes; nothing at all is a client that went away.)
        if (!parser.got_some()) {
          ec = http::error::end_of_stream;
          break;
        }
        parser.put_eof(ec);
        if (!ec && !parser.is_done()) ec = http::error::partial_message;
        break;
      }
      received = std::min(bytes.size(), received + chunk_bytes);
      continue;
    }
    if (ec) break;
  }
  if (ec) {
    out.failure = ClassifyReadError(ec, options);
    return out;
  }
  out.ok = true;
  out.consumed = parsed;
  out.request = TakeRequest(parser, &out.keep_alive);
  return out;
}

}  // namespace tandem::net::internal
