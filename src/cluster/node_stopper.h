// StopNode: `tandem down` for one node, from its state file. Signals only the processes
// the file names, and only while each is still the same process (ProcessIdentity):
// 1. the supervisor (tandem up) gets SIGTERM when it runs, and stops its services in
//    order (proxy first, etcd last);
// 2. services still running then — or all of them when the supervisor is gone — get
//    SIGTERM to their process group;
// 3. after `timeout` whatever still runs gets SIGKILL.
// Returns once none of them runs. Never looks processes up by name.
//
// Thread safety: stateless; signals other processes.
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>

#include "cluster/cluster_state.h"
#include "common/status.h"

namespace tandem::cluster {

struct StopOptions {
  std::chrono::milliseconds timeout{30'000};  // per phase: SIGTERM -> SIGKILL
  std::chrono::milliseconds poll_interval{100};
};

// Stops what `state` names; progress lines go to `out`. OK when nothing runs any more
// (also when nothing ran); Internal when a process survived SIGKILL (not ours to wait on).
Status StopNode(const ClusterState& state, const StopOptions& options, std::ostream& out);

}  // namespace tandem::cluster
