// Which IPv4 address this host goes by, for telling peers where to reach it. There is
// no single answer, and the callers ask three different questions, so there are three
// functions (one file, so a new caller finds them all):
//   - DefaultAdvertiseAddress: what `tandem serve` advertises for its KV transfer
//     server when no flag names an address ($VLLM_HOST_IP, as vLLM, else an interface);
//   - HostnameAddress: what this host's own name resolves to (`tandem probe`'s default
//     host, as Python's socket.gethostbyname(socket.gethostname()));
//   - RouteSourceAddress: the source address the kernel's routing table picks toward a
//     given peer (expert parallelism binds Gloo to it);
// and InterfaceIpv4Address, the interface scan the first one is made of (also what
// GLOO_SOCKET_IFNAME selects).
// All are IPv4 only and return dotted-quad text.
// Thread safety: thread-safe (they read the system's tables and the environment).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::net {

// Which interfaces InterfaceIpv4Address looks at.
struct InterfaceMatch {
  std::string name;                  // only the interface of this name; empty: any
  bool skip_down_and_loopback = false;  // skip interfaces that are not up, and loopback ones
};

// The first IPv4 address, in getifaddrs order, of an interface that `match` accepts.
// NotFound when there is none; Unavailable when getifaddrs fails ("getifaddrs: ...").
StatusOr<std::string> InterfaceIpv4Address(const InterfaceMatch& match);

// $VLLM_HOST_IP when set and not empty, else the first IPv4 address of an interface that
// is up and not loopback, else "127.0.0.1".
std::string DefaultAdvertiseAddress();

// The first IPv4 address gethostname()'s name resolves to (getaddrinfo); "127.0.0.1"
// when the name is not available or does not resolve.
std::string HostnameAddress();

// The local address a connected UDP socket toward `peer` (an IPv4 literal) is bound to:
// the route's source address. Nothing is sent. `peer_label` names the peer in errors
// (e.g. "--data-parallel-address"): InvalidArgument "<label> <peer> is not an IPv4
// address"; Unavailable "no route to <label> <peer>: ..." (or "socket: ...").
StatusOr<std::string> RouteSourceAddress(const std::string& peer, std::string_view peer_label);

}  // namespace tandem::net
