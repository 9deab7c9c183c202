// Socket addresses of the framed-socket layer: "IP:PORT" text, IP literals (v4 and v6)
// with a port, and abstract Unix socket names.
//
// Abstract Unix names are given without the leading NUL ("tandem-kv-8100" is the socket
// "@tandem-kv-8100"); names longer than sun_path allows are cut to fit.
// Thread safety: value types and pure functions.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};
// "IP:PORT" -> HostPort; InvalidArgument otherwise. The host must be an IPv4 literal.
StatusOr<HostPort> ParseHostPort(std::string_view text);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// A socket address ready for connect() or bind().
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_UNSPEC;
  std::string description;  // "127.0.0.1:8100" or "unix:@name", for error messages

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }

  // An IPv4 or IPv6 literal ("localhost" means 127.0.0.1) and a port (0 = any, for
  // bind). InvalidArgument naming the text when it is neither.
  static StatusOr<SocketAddress> Ip(const std::string& host, uint16_t port);
  // The abstract Unix socket `name` (without the leading NUL).
  static SocketAddress AbstractUnix(std::string_view name);
};

}  // namespace tandem::net
