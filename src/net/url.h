// HttpUrl: the parts of an "http://host:port/target" URL that an HTTP/1.1 client needs.
//
// Accepted: "http://host[:port][/target]" and the scheme-less "host[:port][/target]";
// IPv6 literals in brackets ("http://[::1]:8000/v1"). The port defaults to 80, the
// target to "/". "https" is rejected (Unimplemented): Tandem speaks plain HTTP inside
// the cluster.
//
// Thread safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::net {

struct HttpUrl {
  std::string host;  // without brackets for IPv6
  uint16_t port = 80;
  std::string target = "/";  // path plus optional "?query"

  // "host:port" ("[v6]:port"), as sent in the Host header.
  std::string HostPort() const;
};

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace tandem::net
