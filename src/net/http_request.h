// HttpRequest: one parsed HTTP/1.x request as the server hands it to a handler.
//
// Thread safety: a value type; concurrent const access is safe, mutation is not.
#pragma once

#include <string>
#include <string_view>

#include "net/http_headers.h"

namespace tandem::net {

struct HttpRequest {
  std::string method;          // as sent, e.g. "GET", "POST" (methods are case-sensitive)
  std::string target;          // request-target as sent: path plus optional "?query"
  int version = 11;            // 10 for HTTP/1.0, 11 for HTTP/1.1
  HttpHeaders headers;
  std::string body;            // the whole body (bounded by HttpServerOptions::max_body_bytes)
  std::string remote_address;  // the peer as "ip:port" ("[v6]:port" for IPv6)

  // The target up to (excluding) '?'. Borrows from `target`.
  std::string_view path() const {
    std::string_view t(target);
    return t.substr(0, t.find('?'));
  }
  // The target after '?', or empty. Borrows from `target`.
  std::string_view query() const {
    std::string_view t(target);
    size_t q = t.find('?');
    return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
  }
};

}  // namespace tandem::net
