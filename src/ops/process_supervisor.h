// ProcessSupervisor: runs a set of child processes (the ranks of `tandem launch`) and
// keeps them as one unit.
//
// - Each child runs in its own process group, so a signal reaches the child's whole tree
//   (a template script and the engine it started), not just the shell.
// - SIGINT and SIGTERM sent to the supervisor are forwarded to every group; if the
//   children have not all exited `stop_timeout` later, their groups get SIGKILL.
// - When a child exits non-zero (or is killed) while the others run, the others are
//   stopped the same way and Wait() returns non-zero.
// - The supervisor is a child subreaper (Linux), so processes that a child leaves behind
//   are reaped too: Wait() returns only when no descendant is left.
//
// Thread safety: not thread-safe; use from the main thread only. Start() blocks SIGINT,
// SIGTERM and SIGCHLD in the calling thread (children get the default mask back), so
// create the supervisor before starting other threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

struct SupervisorOptions {
  std::chrono::milliseconds stop_timeout{30'000};  // SIGTERM/SIGINT -> SIGKILL
};

class ProcessSupervisor {
 public:
  explicit ProcessSupervisor(SupervisorOptions options = {});
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts `argv` (argv[0] looked up in PATH) with this process's stdio. `name` labels the
  // child in log lines. Returns the pid; Internal when fork fails. A failing exec shows
  // up as the child exiting 127.
  StatusOr<pid_t> Start(const std::string& name, const std::vector<std::string>& argv);

  // Supervises until every child and descendant has exited. Returns 0 when all children
  // exited 0, or all ended after a forwarded stop signal; otherwise the first failing
  // child's exit code (128 + signal number when it was killed), at least 1.
  int Wait();

 private:
  struct Child {
    std::string name;
    pid_t pid = 0;
    bool running = true;
  };
  void SignalAll(int sig);
  // Reaps what has exited; records the first failure and starts stopping on it.
  void Reap(bool* no_descendants_left);

  SupervisorOptions options_;
  std::vector<Child> children_;
  bool stopping_ = false;
  bool killed_ = false;
  int exit_code_ = 0;
  std::chrono::steady_clock::time_point kill_deadline_;
};

}  // namespace tandem::ops
