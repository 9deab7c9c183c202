#include "cluster/node_stopper.h"

#include <signal.h>
#include <unistd.h>

#include <ostream>
#include <thread>
#include <vector>

namespace tandem::cluster {
namespace {

using Clock = std::chrono::steady_clock;

struct Target {
  std::string name;
  ProcessIdentity process;
  bool group = false;  // a service leads its own process group
};

std::vector<Target> Running(const std::vector<Target>& targets) {
  std::vector<Target> out;
  for (const Target& t : targets) {
    if (IsRunning(t.process)) out.push_back(t);
  }
  return out;
}

void Signal(const std::vector<Target>& targets, int sig) {
  for (const Target& t : targets) {
    if (!IsRunning(t.process)) continue;  // checked right before: never a recycled pid
    kill(t.group ? -t.process.pid : t.process.pid, sig);
  }
}

// True when none of `targets` runs before `deadline`.
bool WaitGone(const std::vector<Target>& targets, Clock::time_point deadline,
              std::chrono::milliseconds poll) {
  while (!Running(targets).empty()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

std::string Names(const std::vector<Target>& targets) {
  std::string out;
  for (const Target& t : targets)
    out += (out.empty() ? "" : ", ") + t.name + " (pid " + std::to_string(t.process.pid) + ")";
  return out;
}

}  // namespace

Status StopNode(const ClusterState& state, const StopOptions& options, std::ostream& out) {
  const Target supervisor{"tandem up", state.supervisor, false};
  std::vector<Target> services;
  for (auto it = state.services.rbegin(); it != state.services.rend(); ++it) {  // proxy first
    services.push_back({it->name, it->process, true});
  }
  std::vector<Target> all = services;
  all.push_back(supervisor);
  if (Running(all).empty()) {
    out << "node " << state.node << ": nothing runs" << std::endl;
    return Status::Ok();
  }

  bool stopped = false;
  if (IsRunning(supervisor.process)) {
    out << "node " << state.node << ": stopping tandem up (pid " << supervisor.process.pid << ")"
        << std::endl;
    Signal({supervisor}, SIGTERM);
    stopped = WaitGone(all, Clock::now() + options.timeout, options.poll_interval);
  } else {
    const std::vector<Target> running = Running(services);
    out << "node " << state.node << ": tandem up is gone; stopping " << Names(running) << std::endl;
    Signal(running, SIGTERM);
    stopped = WaitGone(all, Clock::now() + options.timeout, options.poll_interval);
  }
  if (!stopped) {
    const std::vector<Target> left = Running(all);
    out << "node " << state.node << ": still running after " << options.timeout.count() / 1000.0
        << " s, killing " << Names(left) << std::endl;
    Signal(left, SIGKILL);
    if (!WaitGone(all, Clock::now() + std::chrono::seconds(10), options.poll_interval)) {
      return InternalError("node " + state.node + ": " + Names(Running(all)) + " survived SIGKILL");
    }
  }
  out << "node " << state.node << ": stopped" << std::endl;
  return Status::Ok();
}

}  // namespace tandem::cluster
