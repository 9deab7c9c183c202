#include "net/host_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tandem::net {
namespace {

constexpr const char* kLoopback = "127.0.0.1";

std::string Ipv4Text(const in_addr& addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

}  // namespace

StatusOr<std::string> InterfaceIpv4Address(const InterfaceMatch& match) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return UnavailableError(std::string("getifaddrs: ") + std::strerror(errno));
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (!match.name.empty() && match.name != a->ifa_name) continue;
    if (match.skip_down_and_loopback && (!(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK))) continue;
    found = Ipv4Text(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr);
  }
  ::freeifaddrs(list);
  if (found.empty()) return NotFoundError("no IPv4 address on a matching interface");
  return found;
}

std::string DefaultAdvertiseAddress() {
  if (const char* env = std::getenv("VLLM_HOST_IP"); env != nullptr && *env != '\0') return env;
  StatusOr<std::string> address = InterfaceIpv4Address({.name = "", .skip_down_and_loopback = true});
  return address.ok() ? *address : kLoopback;
}

std::string HostnameAddress() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return kLoopback;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &result) != 0 || result == nullptr) return kLoopback;
  std::string text = Ipv4Text(reinterpret_cast<const sockaddr_in*>(result->ai_addr)->sin_addr);
  ::freeaddrinfo(result);
  return text;
}

StatusOr<std::string> RouteSourceAddress(const std::string& peer, std::string_view peer_label) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // any port: a UDP connect only picks the route
  const std::string label(peer_label);
  if (::inet_pton(AF_INET, peer.c_str(), &to.sin_addr) != 1) {
    return InvalidArgumentError(label + " " + peer + " is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError("socket: " + std::string(std::strerror(errno)));
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return UnavailableError("no route to " + label + " " + peer + ": " + std::strerror(err));
  return Ipv4Text(self.sin_addr);
}

}  // namespace tandem::net
