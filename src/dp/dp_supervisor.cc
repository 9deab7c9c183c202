#include "dp/dp_supervisor.h"

#include <map>
#include <memory>

#include "common/logging.h"
#include "dp/dp_front_end.h"
#include "dp/rank_roster.h"
#include "net/http_client.h"
#include "ops/process_supervisor.h"

namespace tandem::dp {
namespace {

using Clock = std::chrono::steady_clock;

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

// POSTs one registration to the front end. Unavailable when nothing answers there;
// FailedPrecondition with the front end's message when it refuses the rank.
Status PostRegistration(net::HttpClient& client, const DpPlan& plan, const std::string& api_key,
                        const RankRegistration& registration) {
  net::HttpClientRequest request;
  request.method = "POST";
  request.host = plan.address;
  request.port = static_cast<uint16_t>(plan.rpc_port);
  request.target = "/dp/ranks";
  request.body = RankRegistrationBody(registration);
  request.headers.Set("Content-Type", "application/json");
  if (!api_key.empty()) request.headers.Set("Authorization", "Bearer " + api_key);
  request.timeout = std::chrono::seconds(2);
  StatusOr<net::HttpResponse> response = client.Fetch(std::move(request));
  if (!response.ok()) return UnavailableError(response.status().message());
  if (response->status != 200) {
    return FailedPreconditionError("the front end answered " + std::to_string(response->status) +
                                   ": " + response->body);
  }
  return Status::Ok();
}

}  // namespace

int RunDataParallel(const DpRunOptions& o) {
  const DpPlan& plan = o.plan;
  const bool headless = plan.mode == DpMode::kHeadless;
  std::vector<std::string> failed;  // ranks that died since the last round (by child name)
  // First: it blocks the stop signals in this thread, which every later thread inherits.
  ops::ProcessSupervisor supervisor;
  supervisor.set_on_failure([&failed](const std::string& name, bool) { failed.push_back(name); });

  std::unique_ptr<DpFrontEnd> front;
  if (!headless) {
    DpFrontEndOptions f;
    f.proxy = o.front_end;
    f.size = plan.size;
    f.rpc_host = plan.address;
    f.rpc_port = plan.rpc_port;
    auto created = DpFrontEnd::Create(std::move(f));
    if (!created.ok()) {
      TANDEM_LOG(ERROR) << created.status().ToString();
      return 2;
    }
    front = std::move(*created);
    if (Status s = front->Start(); !s.ok()) {
      TANDEM_LOG(ERROR) << s.ToString();
      return 1;
    }
  }

  // How the front end reaches the local ranks.
  const std::string reach_host =
      headless ? o.advertise_host : (IsWildcard(o.rank_host) ? "127.0.0.1" : o.rank_host);
  std::map<std::string, const RankSlot*> slot_of;  // child name -> its rank
  for (const RankSlot& slot : plan.ranks) {
    const std::string name =
        "DP rank " + std::to_string(slot.rank) + " (port " + std::to_string(slot.port) + ")";
    ops::ChildOptions child;
    child.stop_with_supervisor = true;
    child.restart_on_failure = true;
    child.fatal_exit_codes = {2};  // bad input: restarting cannot help
    auto pid = supervisor.Start(name, RankArgv(o.exe, o.user_args, plan, slot, o.rank_host), child);
    if (!pid.ok()) {
      TANDEM_LOG(ERROR) << name << ": " << pid.status().ToString();
      supervisor.Stop(1);
      break;
    }
    slot_of[name] = &slot;
    if (front) {
      if (Status s = front->RegisterRank(slot.rank, {reach_host, static_cast<uint16_t>(slot.port)});
          !s.ok()) {
        TANDEM_LOG(ERROR) << s.ToString();
        supervisor.Stop(2);
      }
    }
  }

  std::unique_ptr<net::HttpClient> client;
  if (headless) client = std::make_unique<net::HttpClient>(net::HttpClientOptions{});
  const std::string front_address =
      proxy::BackendAddress{plan.address, static_cast<uint16_t>(plan.rpc_port)}.Key();
  const Clock::time_point started = Clock::now();
  Clock::time_point last_register = started - o.register_interval;  // register at once
  bool joined = false, lost_logged = false;
  while (supervisor.Poll(std::chrono::milliseconds(200))) {
    for (const std::string& name : failed) {
      auto it = slot_of.find(name);
      if (it == slot_of.end()) continue;
      const RankSlot& slot = *it->second;
      if (front) {
        front->RankDown(slot.rank);
      } else if (joined) {
        Status s =
            PostRegistration(*client, plan, o.api_key,
                             {slot.rank, {reach_host, static_cast<uint16_t>(slot.port)}, false});
        if (!s.ok())
          TANDEM_LOG(WARNING) << "could not report DP rank " << slot.rank
                              << " down: " << s.message();
      }
    }
    failed.clear();
    if (!headless || Clock::now() - last_register < o.register_interval) continue;
    last_register = Clock::now();
    Status s = Status::Ok();
    for (const RankSlot& slot : plan.ranks) {
      s = PostRegistration(*client, plan, o.api_key,
                           {slot.rank, {reach_host, static_cast<uint16_t>(slot.port)}, true});
      if (!s.ok()) break;
    }
    if (s.code() == StatusCode::kFailedPrecondition) {
      TANDEM_LOG(ERROR) << "the data-parallel front end at " << front_address
                        << " refused this node's ranks: " << s.message();
      supervisor.Stop(2);
      continue;
    }
    if (s.ok()) {
      if (!joined || lost_logged) {
        TANDEM_LOG(INFO) << "registered DP ranks " << plan.ranks.front().rank << ".."
                         << plan.ranks.back().rank << " with the front end at " << front_address;
      }
      joined = true;
      lost_logged = false;
      continue;
    }
    if (joined) {
      if (!lost_logged) {
        TANDEM_LOG(WARNING) << "the data-parallel front end at " << front_address
                            << " does not answer (" << s.message() << "); re-registering every "
                            << o.register_interval.count() / 1000.0 << " s";
      }
      lost_logged = true;
      continue;
    }
    const auto waited = Clock::now() - started;
    if (waited >= o.join_timeout) {
      TANDEM_LOG(ERROR) << "no data-parallel front end answered at " << front_address
                        << " (--data-parallel-address / --data-parallel-rpc-port) within "
                        << o.join_timeout.count() / 1000.0
                        << " s (--data-parallel-join-timeout); stopping this node's ranks";
      supervisor.Stop(2);
      continue;
    }
    TANDEM_LOG(WARNING)
        << "waiting for the data-parallel front end at " << front_address
        << " (--data-parallel-address / --data-parallel-rpc-port): " << s.message()
        << "; retrying every " << o.register_interval.count() / 1000.0 << " s, giving up in "
        << std::chrono::duration_cast<std::chrono::seconds>(o.join_timeout - waited).count()
        << " s";
  }
  const int code = supervisor.Wait();
  if (front) front->Stop();
  TANDEM_LOG(INFO) << "all data-parallel ranks have exited; exit code " << code;
  return code;
}

}  // namespace tandem::dp
