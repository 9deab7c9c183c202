// RankRoster: which data-parallel rank is served at which address, as the front end
// learns it (its local ranks at start, headless nodes' ranks through registration).
//
// Only ranks in [0, size) are accepted, so at most `size` are ever registered. A rank
// registered again at the same address changes nothing (headless nodes re-register
// every few seconds, which also brings them back after a front-end restart); at another
// address it replaces the old one (the rank was restarted elsewhere).
//
// The registration wire format (POST /dp/ranks on --data-parallel-rpc-port):
//   {"rank": R, "address": "host:port", "state": "up" | "down"}
// "up" registers (or re-registers) the rank; "down" says its process died (the front
// end stops routing to it until its /health answers 200 again).
//
// Thread safety: not thread-safe (the front end guards it with its mutex).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "proxy/backend_registry.h"

namespace tandem::dp {

struct RankRegistration {
  int rank = 0;
  proxy::BackendAddress address;
  bool up = true;  // false: "down"
};

// Parses a registration body. InvalidArgument naming the field ("rank", "address",
// "state") when it is missing or malformed.
StatusOr<RankRegistration> ParseRankRegistration(std::string_view body);
// The body for `registration`.
std::string RankRegistrationBody(const RankRegistration& registration);

class RankRoster {
 public:
  explicit RankRoster(int size) : size_(size) {}

  struct Change {
    bool added = false;                             // new rank, or a new address
    std::optional<proxy::BackendAddress> replaced;  // the rank's previous address
  };
  // Registers `rank` at `address`. InvalidArgument when the rank is outside [0, size).
  StatusOr<Change> Register(int rank, const proxy::BackendAddress& address);

  // The rank's address, if registered.
  std::optional<proxy::BackendAddress> Find(int rank) const;
  const std::map<int, proxy::BackendAddress>& ranks() const { return ranks_; }
  int size() const { return size_; }

 private:
  const int size_;
  std::map<int, proxy::BackendAddress> ranks_;
};

}  // namespace tandem::dp
