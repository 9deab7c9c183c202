#include "dp/rank_roster.h"

#include "proxy/pd_bodies.h"

namespace tandem::dp {

using proxy::Json;

StatusOr<RankRegistration> ParseRankRegistration(std::string_view body) {
  TANDEM_ASSIGN_OR_RETURN(Json json, proxy::ParseClientBody(body));
  RankRegistration out;
  auto rank = json.find("rank");
  if (rank == json.end() || !rank->is_number_integer()) {
    return InvalidArgumentError("'rank' must be an integer");
  }
  const int64_t r = rank->get<int64_t>();
  if (r < 0 || r > 1 << 20) return InvalidArgumentError("'rank' is out of range");
  out.rank = static_cast<int>(r);
  auto address = json.find("address");
  if (address == json.end() || !address->is_string()) {
    return InvalidArgumentError("'address' must be a \"host:port\" string");
  }
  TANDEM_ASSIGN_OR_RETURN(out.address, proxy::ParseBackendAddress(address->get<std::string>()));
  auto state = json.find("state");
  if (state != json.end()) {
    if (!state->is_string() || (*state != "up" && *state != "down")) {
      return InvalidArgumentError("'state' must be \"up\" or \"down\"");
    }
    out.up = *state == "up";
  }
  return out;
}

std::string RankRegistrationBody(const RankRegistration& registration) {
  return proxy::DumpJson(Json{{"rank", registration.rank},
                              {"address", registration.address.Key()},
                              {"state", registration.up ? "up" : "down"}});
}

StatusOr<RankRoster::Change> RankRoster::Register(int rank, const proxy::BackendAddress& address) {
  if (rank < 0 || rank >= size_) {
    return InvalidArgumentError("rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(size_) + ") (--data-parallel-size " +
                                std::to_string(size_) + ")");
  }
  Change change;
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) {
    if (it->second == address) return change;
    change.replaced = it->second;
    it->second = address;
  } else {
    ranks_.emplace(rank, address);
  }
  change.added = true;
  return change;
}

std::optional<proxy::BackendAddress> RankRoster::Find(int rank) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tandem::dp
