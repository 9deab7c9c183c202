// ProcessIdentity: a pid plus the process's start time, so that a pid the kernel has
// handed to another process since is never taken for ours (`tandem down` signals only
// the processes `tandem up` started, even hours later).
//
// Linux only (/proc/PID/stat). Thread safety: plain values and stateless functions.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/status.h"

namespace tandem::cluster {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22: clock ticks after boot
};

// NotFound when no process `pid` exists.
StatusOr<ProcessIdentity> IdentifyProcess(pid_t pid);

// This process.
ProcessIdentity SelfIdentity();

// True while the process exists, is not a zombie and started at `p.start_ticks`.
bool IsRunning(const ProcessIdentity& p);

}  // namespace tandem::cluster
