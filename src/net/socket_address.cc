#include "net/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstring>

namespace tandem::net {

StatusOr<HostPort> ParseHostPort(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("address '" + std::string(text) + "' is not IP:PORT");
  }
  int port = 0;
  const std::string_view tail = text.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), port);
  if (ec != std::errc() || ptr != tail.data() + tail.size() || port <= 0 || port > 65535) {
    return InvalidArgumentError("address '" + std::string(text) + "' has a bad port");
  }
  HostPort hp{std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
  in_addr a{};
  if (inet_pton(AF_INET, hp.host.c_str(), &a) != 1) {
    return InvalidArgumentError("address '" + std::string(text) +
                                "': host must be an IPv4 address");
  }
  return hp;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

StatusOr<SocketAddress> SocketAddress::Ip(const std::string& host, uint16_t port) {
  const std::string literal = host == "localhost" ? "127.0.0.1" : host;
  SocketAddress out;
  out.description = literal + ":" + std::to_string(port);
  if (literal.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, literal.c_str(), &a6->sin6_addr) != 1) {
      return InvalidArgumentError("bad IP address \"" + host + "\"");
    }
    out.family = AF_INET6;
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  a4->sin_family = AF_INET;
  a4->sin_port = htons(port);
  if (inet_pton(AF_INET, literal.c_str(), &a4->sin_addr) != 1) {
    return InvalidArgumentError("bad IP address \"" + host + "\"");
  }
  out.family = AF_INET;
  out.length = sizeof(sockaddr_in);
  return out;
}

SocketAddress SocketAddress::AbstractUnix(std::string_view name) {
  SocketAddress out;
  auto* addr = reinterpret_cast<sockaddr_un*>(&out.storage);
  addr->sun_family = AF_UNIX;
  // Abstract namespace: sun_path starts with '\0' and the length is exact.
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);
  out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  out.family = AF_UNIX;
  out.description = "unix:@" + std::string(name.substr(0, n));
  return out;
}

}  // namespace tandem::net
