// BackendRegistry: the prefill and decode instances behind the proxy, their load and
// their health, and the least-loaded choice among them.
//
// Each instance is a Backend with a role, an address, and counters guarded by the
// registry: `load` (in-flight prefill tokens for a prefiller, in-flight decode tokens
// for a decoder or a worker, all estimated by the caller) and `in_flight` (requests). States:
//   kUp       routable;
//   kDown     a call to it failed; routed to only when no instance of its role is up,
//             probed (GET /health) by HealthProber until it answers, then kUp again;
//   kPending  added at run time (/instances/add) but not healthy yet; never routed to;
//             becomes kUp on a healthy probe, or is dropped after too many failures.
// Removing an instance with requests in flight drains it: it is no longer picked and
// leaves the registry when its last request releases it.
// An instance may carry a label (the DP front end's rank number: the `engine` label of
// its series on the aggregated /metrics) and the load it last reported about itself
// (ReportLoad; used by RoutingPolicy::kRankLoad).
//
// Thread safety: all methods are thread-safe (one mutex). Backend objects are shared
// (BackendPtr): a request keeps its backends valid after they were removed. Their
// mutable fields are only read or written through the registry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "proxy/routing_policy.h"

namespace tandem::proxy {

// A worker (--worker-urls) does both phases of a request: the proxy forwards the
// request to it unchanged (no PD).
enum class Role { kPrefill = 0, kDecode = 1, kWorker = 2 };
inline constexpr int kNumRoles = 3;

// "prefill" / "decode" / "worker" (the /instances API's spelling).
std::string_view RoleName(Role role);

struct BackendAddress {
  std::string host;  // name or IP literal (IPv6 without brackets)
  uint16_t port = 0;

  // "host:port" ("[v6]:port").
  std::string Key() const;
  bool operator==(const BackendAddress& other) const = default;
};

// Parses "host:port" or "[v6]:port". InvalidArgument on anything else.
StatusOr<BackendAddress> ParseBackendAddress(std::string_view text);

class Backend {
 public:
  enum class State { kUp, kDown, kPending };

  Backend(Role role, BackendAddress address, uint64_t ordinal, std::string label = "")
      : role_(role), address_(std::move(address)), ordinal_(ordinal), label_(std::move(label)) {}

  Role role() const { return role_; }
  const BackendAddress& address() const { return address_; }
  const std::string& label() const { return label_; }

 private:
  friend class BackendRegistry;
  const Role role_;
  const BackendAddress address_;
  const uint64_t ordinal_;  // registration order
  const std::string label_;  // "" = none
  // Guarded by the registry's mutex.
  State state_ = State::kUp;
  bool draining_ = false;   // removed while busy; leaves when idle
  bool registered_ = true;  // false once it left the registry
  int64_t load_ = 0;        // estimated in-flight tokens
  int64_t in_flight_ = 0;   // requests holding it
  uint64_t last_pick_ = 0;  // pick sequence number (ties go to the least recent)
  int failed_probes_ = 0;   // kPending: probes that failed so far
  RankLoad reported_;       // the instance's last ReportLoad
  int64_t sent_since_report_ = 0;  // picks since that report
  Gauge* up_gauge_ = nullptr;
  Gauge* in_flight_gauge_ = nullptr;
};

using BackendPtr = std::shared_ptr<Backend>;

// A consistent view of one instance, for /health, /instances and tests.
struct BackendInfo {
  Role role;
  BackendAddress address;
  Backend::State state;
  bool draining;
  int64_t load;
  int64_t in_flight;
  std::string label;
  RankLoad reported;
  int64_t sent_since_report;
};

class BackendRegistry {
 public:
  // `metrics` (may be null) receives tandem_proxy_backend_up and
  // tandem_proxy_backend_in_flight_requests per instance; it must outlive the registry.
  explicit BackendRegistry(MetricsRegistry* metrics = nullptr) : metrics_(metrics) {}

  // Registers an instance in `state` (kUp or kPending) and returns it. Returns null (and
  // changes nothing) when the address is already registered for that role, unless it is
  // draining: then it is kept, no longer drains, and is returned.
  // `label` is kept with a new instance (see above).
  BackendPtr Add(Role role, const BackendAddress& address,
                 Backend::State state = Backend::State::kUp, const std::string& label = "");

  // The instance's own report of its load; restarts its sent-since-report count.
  // False when no such instance is registered.
  bool ReportLoad(Role role, const BackendAddress& address, const RankLoad& load);
  // The registered instance of `role` at `address`, or null.
  BackendPtr Find(Role role, const BackendAddress& address) const;

  enum class RemoveResult { kRemoved, kDraining, kNotFound };
  RemoveResult Remove(Role role, const BackendAddress& address);

  // Picks the instance of `role` to use and charges it `load` and one request:
  // the least-loaded kUp, non-draining instance not in `tried` (ties: least recently
  // picked); failing that, one in `tried` that is up; failing that (nothing up), the
  // least-loaded kDown one. Null when the role has no routable instance at all.
  // The caller must Release() what it got, with the same load.
  BackendPtr Pick(Role role, int64_t load, const std::vector<BackendPtr>& tried = {});

  // Pick with a policy applied among the up, untried candidates (when there are none,
  // Pick's fallbacks, reason kFallback). For kPrefixAware, `cached_tokens(backend)`
  // predicts each candidate's cached prefix (empty function: not scored, least_load
  // with reason kNotScored). Charges and must be released as Pick.
  struct Routed {
    BackendPtr backend;  // null when the role has no routable instance
    RouteReason reason = RouteReason::kLeastLoad;
    int64_t cached_tokens = 0;  // the prediction for the chosen instance
  };
  Routed PickRouted(Role role, int64_t load, const std::vector<BackendPtr>& tried,
                    RoutingPolicy policy, int64_t load_threshold,
                    const std::function<int64_t(const Backend&)>& cached_tokens);
  void Release(const BackendPtr& backend, int64_t load);

  // A call failed (kUp -> kDown) / a probe succeeded (kDown or kPending -> kUp).
  // No effect on instances that left the registry.
  void MarkDown(const BackendPtr& backend);
  void MarkUp(const BackendPtr& backend);
  // A probe of a kPending instance failed; drops it after `max_failures` failures.
  // Returns true when it was dropped.
  bool PendingProbeFailed(const BackendPtr& backend, int max_failures);

  // Instances in `state` (for the prober).
  std::vector<BackendPtr> InState(Backend::State state) const;
  // Registered instances (all states) in registration order.
  std::vector<BackendInfo> Snapshot() const;
  // Registered instances of `role` that are not pending.
  size_t CountActive(Role role) const;

 private:
  void SetStateLocked(Backend& backend, Backend::State state);
  void UnregisterLocked(const BackendPtr& backend);
  BackendPtr FindLocked(Role role, const BackendAddress& address) const;
  // Pick's tiered least-load choice (no charge).
  BackendPtr ChooseLocked(Role role, const std::vector<BackendPtr>& tried) const;
  void ChargeLocked(Backend& backend, int64_t load);

  MetricsRegistry* const metrics_;
  mutable std::mutex mu_;
  std::vector<BackendPtr> backends_[kNumRoles];  // per Role, registration order
  uint64_t next_ordinal_ = 0;
  uint64_t pick_seq_ = 0;
  uint64_t round_robin_last_[kNumRoles] = {};  // ordinal + 1 of round_robin's last pick
};

}  // namespace tandem::proxy
