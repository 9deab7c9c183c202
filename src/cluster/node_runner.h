// RunNode: `tandem up` for one node. Starts the NodePlan's services level by level
// (etcd -> pool -> engines -> proxy) under an ops::ProcessSupervisor, each with its own
// log file and process group, waits until every service of a level is ready before the
// next level starts, keeps the node's state file current, then supervises in the
// foreground:
// - SIGINT/SIGTERM stops every service (proxy first, etcd last; SIGKILL after
//   stop_timeout) and returns 0;
// - a service that exits, or one that is not ready in its time, stops the rest and the
//   result is non-zero (the end of that service's log is printed to stderr).
// When the last process has gone the state file is removed.
//
// Thread safety: call from the main thread, before any other thread is started (the
// supervisor blocks SIGINT/SIGTERM/SIGCHLD in the calling thread).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "cluster/cluster_state.h"
#include "cluster/node_plan.h"
#include "common/status.h"

namespace tandem::cluster {

struct UpOptions {
  std::chrono::milliseconds stop_timeout{20'000};  // stop signal -> SIGKILL
  std::chrono::milliseconds poll_interval{200};    // between readiness probes
  // Called once, when every service of the node is ready (prints the summary).
  std::function<void(const ClusterState& state)> on_ready;
};

// FailedPrecondition when the state file names a process that still runs (the node is
// up, or a previous tandem up was killed and left services behind).
Status CheckNodeNotRunning(const std::string& state_path);

// FailedPrecondition naming the service when one of the node's ports cannot be bound on
// its address: in use, or an address this host does not have (the wrong --node).
Status CheckPortsFree(const NodePlan& plan);

// Runs the node in the foreground until it stops; returns the exit code.
int RunNode(const NodePlan& plan, const UpOptions& options);

// --detach: runs RunNode in a background process (its own session; its output goes to
// <logs_dir>/up.log) and returns once the node is ready (0; options.on_ready is called
// here) or the background process has given up (1, with the end of up.log on stderr).
int RunNodeDetached(const NodePlan& plan, const UpOptions& options);

// The last `max_lines` lines of a text file ("" when unreadable).
std::string TailOfFile(const std::string& path, int max_lines);

}  // namespace tandem::cluster
