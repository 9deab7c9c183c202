#include "proxy/backend_registry.h"

#include <algorithm>
#include <charconv>

#include "common/logging.h"

namespace tandem::proxy {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kPrefill:
      return "prefill";
    case Role::kDecode:
      return "decode";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

std::string BackendAddress::Key() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

StatusOr<BackendAddress> ParseBackendAddress(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError("bad instance address '" + std::string(text) +
                                "' (want host:port)");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad();
  std::string_view host = text.substr(0, colon);
  std::string_view port_text = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad();  // an IPv6 literal needs brackets
  }
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return bad();
  }
  return BackendAddress{std::string(host), static_cast<uint16_t>(port)};
}

BackendPtr BackendRegistry::Add(Role role, const BackendAddress& address, Backend::State state,
                                const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  if (BackendPtr existing = FindLocked(role, address)) {
    if (!existing->draining_) return nullptr;
    existing->draining_ = false;
    return existing;
  }
  auto backend = std::make_shared<Backend>(role, address, next_ordinal_++, label);
  if (metrics_ != nullptr) {
    MetricLabels labels{{"role", std::string(RoleName(role))}, {"instance", address.Key()}};
    backend->up_gauge_ =
        metrics_->GetGauge("tandem_proxy_backend_up",
                           "1 when the instance is routable, 0 when down or pending", labels);
    backend->in_flight_gauge_ =
        metrics_->GetGauge("tandem_proxy_backend_in_flight_requests",
                           "Requests the proxy has on the instance", labels);
    backend->in_flight_gauge_->Set(0);
  }
  SetStateLocked(*backend, state);
  backends_[static_cast<int>(role)].push_back(backend);
  return backend;
}

bool BackendRegistry::ReportLoad(Role role, const BackendAddress& address, const RankLoad& load) {
  std::lock_guard<std::mutex> lock(mu_);
  BackendPtr backend = FindLocked(role, address);
  if (!backend) return false;
  backend->reported_ = load;
  backend->sent_since_report_ = 0;
  return true;
}

BackendPtr BackendRegistry::Find(Role role, const BackendAddress& address) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(role, address);
}

BackendRegistry::RemoveResult BackendRegistry::Remove(Role role, const BackendAddress& address) {
  std::lock_guard<std::mutex> lock(mu_);
  BackendPtr backend = FindLocked(role, address);
  if (!backend) return RemoveResult::kNotFound;
  if (backend->in_flight_ > 0) {
    backend->draining_ = true;
    return RemoveResult::kDraining;
  }
  UnregisterLocked(backend);
  return RemoveResult::kRemoved;
}

BackendPtr BackendRegistry::Pick(Role role, int64_t load, const std::vector<BackendPtr>& tried) {
  std::lock_guard<std::mutex> lock(mu_);
  BackendPtr best = ChooseLocked(role, tried);
  if (best) ChargeLocked(*best, load);
  return best;
}

BackendRegistry::Routed BackendRegistry::PickRouted(
    Role role, int64_t load, const std::vector<BackendPtr>& tried, RoutingPolicy policy,
    int64_t load_threshold, const std::function<int64_t(const Backend&)>& cached_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  Routed out;
  std::vector<BackendPtr> candidates;  // up, untried, in registration order
  for (const BackendPtr& b : backends_[static_cast<int>(role)]) {
    if (b->draining_ || b->state_ != Backend::State::kUp) continue;
    if (std::find(tried.begin(), tried.end(), b) != tried.end()) continue;
    candidates.push_back(b);
  }
  if (candidates.empty()) {
    out.backend = ChooseLocked(role, tried);
    out.reason = RouteReason::kFallback;
  } else if (policy == RoutingPolicy::kRoundRobin) {
    // The first candidate registered after the last pick, wrapping around.
    uint64_t& last = round_robin_last_[static_cast<int>(role)];
    out.backend = candidates.front();
    for (const BackendPtr& b : candidates) {
      if (b->ordinal_ + 1 > last) {
        out.backend = b;
        break;
      }
    }
    last = out.backend->ordinal_ + 1;
    out.reason = RouteReason::kRoundRobin;
  } else {
    std::vector<RouteCandidate> scored;
    for (const BackendPtr& b : candidates) {
      RouteCandidate c{b->load_, b->in_flight_, b->last_pick_, 0};
      if (policy == RoutingPolicy::kPrefixAware && cached_tokens)
        c.cached_tokens = cached_tokens(*b);
      c.rank_score = RankScore(b->reported_, b->sent_since_report_);
      c.kv_usage = b->reported_.kv_usage;
      scored.push_back(c);
    }
    RouteChoice choice{LeastLoaded(scored), RouteReason::kLeastLoad};
    if (policy == RoutingPolicy::kRankLoad) {
      choice = {ChooseRankLoad(scored), RouteReason::kRankLoad};
    } else if (policy == RoutingPolicy::kPrefixAware) {
      choice = cached_tokens ? ChoosePrefixAware(scored, load_threshold)
                             : RouteChoice{choice.index, RouteReason::kNotScored};
    }
    out.backend = candidates[choice.index];
    out.reason = choice.reason;
    out.cached_tokens = scored[choice.index].cached_tokens;
  }
  if (out.backend) ChargeLocked(*out.backend, load);
  return out;
}

BackendPtr BackendRegistry::ChooseLocked(Role role, const std::vector<BackendPtr>& tried) const {
  auto was_tried = [&](const BackendPtr& b) {
    return std::find(tried.begin(), tried.end(), b) != tried.end();
  };
  // Lower tier wins: 0 = up and untried, 1 = up and tried, 2 = down and untried,
  // 3 = down and tried.
  auto tier = [&](const BackendPtr& b) {
    const int tried_bit = was_tried(b) ? 1 : 0;
    return b->state_ == Backend::State::kUp ? tried_bit : 2 + tried_bit;
  };
  BackendPtr best;
  for (const BackendPtr& b : backends_[static_cast<int>(role)]) {
    if (b->draining_ || b->state_ == Backend::State::kPending) continue;
    if (!best) {
      best = b;
      continue;
    }
    const int tb = tier(b), tbest = tier(best);
    if (tb != tbest) {
      if (tb < tbest) best = b;
      continue;
    }
    if (b->load_ != best->load_) {
      if (b->load_ < best->load_) best = b;
      continue;
    }
    if (b->last_pick_ < best->last_pick_) best = b;
  }
  return best;
}

void BackendRegistry::ChargeLocked(Backend& backend, int64_t load) {
  backend.load_ += load;
  backend.in_flight_ += 1;
  backend.sent_since_report_ += 1;
  backend.last_pick_ = ++pick_seq_;
  if (backend.in_flight_gauge_ != nullptr) backend.in_flight_gauge_->Set(backend.in_flight_);
}

void BackendRegistry::Release(const BackendPtr& backend, int64_t load) {
  std::lock_guard<std::mutex> lock(mu_);
  backend->load_ = std::max<int64_t>(0, backend->load_ - load);
  backend->in_flight_ = std::max<int64_t>(0, backend->in_flight_ - 1);
  if (backend->in_flight_gauge_ != nullptr) backend->in_flight_gauge_->Set(backend->in_flight_);
  if (backend->draining_ && backend->in_flight_ == 0 && backend->registered_) {
    UnregisterLocked(backend);
    TANDEM_LOG(INFO) << "removed drained " << RoleName(backend->role()) << " instance "
                     << backend->address().Key();
  }
}

void BackendRegistry::MarkDown(const BackendPtr& backend) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!backend->registered_ || backend->state_ != Backend::State::kUp) return;
  SetStateLocked(*backend, Backend::State::kDown);
  TANDEM_LOG(WARNING) << RoleName(backend->role()) << " instance " << backend->address().Key()
                      << " marked down; probing GET /health until it answers";
}

void BackendRegistry::MarkUp(const BackendPtr& backend) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!backend->registered_ || backend->state_ == Backend::State::kUp) return;
  const bool was_pending = backend->state_ == Backend::State::kPending;
  SetStateLocked(*backend, Backend::State::kUp);
  TANDEM_LOG(INFO) << RoleName(backend->role()) << " instance " << backend->address().Key()
                   << (was_pending ? " added (healthy)" : " is up again");
}

bool BackendRegistry::PendingProbeFailed(const BackendPtr& backend, int max_failures) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!backend->registered_ || backend->state_ != Backend::State::kPending) return false;
  if (++backend->failed_probes_ < max_failures) return false;
  UnregisterLocked(backend);
  TANDEM_LOG(WARNING) << RoleName(backend->role()) << " instance " << backend->address().Key()
                      << " was not added: no healthy answer after " << max_failures << " probes";
  return true;
}

std::vector<BackendPtr> BackendRegistry::InState(Backend::State state) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BackendPtr> out;
  for (const auto& list : backends_) {
    for (const BackendPtr& b : list) {
      if (b->state_ == state) out.push_back(b);
    }
  }
  return out;
}

std::vector<BackendInfo> BackendRegistry::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BackendInfo> out;
  for (const auto& list : backends_) {
    for (const BackendPtr& b : list) {
      out.push_back({b->role(), b->address(), b->state_, b->draining_, b->load_, b->in_flight_,
                     b->label(), b->reported_, b->sent_since_report_});
    }
  }
  return out;
}

size_t BackendRegistry::CountActive(Role role) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const BackendPtr& b : backends_[static_cast<int>(role)]) {
    if (b->state_ != Backend::State::kPending) ++n;
  }
  return n;
}

void BackendRegistry::SetStateLocked(Backend& backend, Backend::State state) {
  backend.state_ = state;
  if (backend.up_gauge_ != nullptr) backend.up_gauge_->Set(state == Backend::State::kUp ? 1 : 0);
}

void BackendRegistry::UnregisterLocked(const BackendPtr& backend) {
  auto& list = backends_[static_cast<int>(backend->role())];
  list.erase(std::remove(list.begin(), list.end(), backend), list.end());
  backend->registered_ = false;
  if (backend->up_gauge_ != nullptr) backend->up_gauge_->Set(0);
}

BackendPtr BackendRegistry::FindLocked(Role role, const BackendAddress& address) const {
  for (const BackendPtr& b : backends_[static_cast<int>(role)]) {
    if (b->address() == address) return b;
  }
  return nullptr;
}

}  // namespace tandem::proxy
