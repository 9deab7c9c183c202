// ProcessSupervisor: runs a set of child processes (the ranks of `tandem launch`) and
// keeps them as one unit.
//
// - Each child runs in its own process group, so a signal reaches the child's whole tree
//   (a template script and the engine it started), not just the shell.
// - SIGINT and SIGTERM sent to the supervisor are forwarded to every group; if the
//   children have not all exited `stop_timeout` later, their groups get SIGKILL.
// - When a child exits non-zero (or is killed) while the others run, the others are
//   stopped the same way and Wait() returns non-zero, unless the child was started with
//   ChildOptions::restart_on_failure: then it alone is started again after a back-off.
// - The supervisor is a child subreaper (Linux), so processes that a child leaves behind
//   are reaped too: Wait() returns only when no descendant is left.
// - Optionally (ChildOptions) a child's output goes to a log file, it gets extra
//   environment variables, and children are stopped in stages (a proxy before the
//   engines, the engines before the store they use). Poll() lets a caller wait for one
//   child's readiness between Start() calls while failures and signals are handled.
//
// Thread safety: not thread-safe; use from the main thread only. Start() blocks SIGINT,
// SIGTERM and SIGCHLD in the calling thread (children get the default mask back), so
// create the supervisor before starting other threads.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

struct SupervisorOptions {
  std::chrono::milliseconds stop_timeout{30'000};  // SIGTERM/SIGINT -> SIGKILL
};

struct ChildOptions {
  // "" = the child writes to this process's stdout/stderr; else both go to this file
  // (created 0644 or appended to).
  std::string log_path;
  // "NAME=VALUE" entries set in the child's environment, over this process's.
  std::vector<std::string> env;
  // Stop order. On a stop, the children of the highest stage get the signal first; a
  // lower stage gets it once no child of a higher stage runs. Equal stages (the default)
  // are signalled together. The SIGKILL deadline covers all stages together.
  int stop_stage = 0;
  // The child gets SIGTERM when this process dies (PR_SET_PDEATHSIG), even by SIGKILL or
  // SIGHUP, so that no service outlives a supervisor that could not stop it.
  bool stop_with_supervisor = false;
  // Restart policy. A child that fails (exits non-zero or is killed) while supervision
  // runs normally does not stop the others: it is started again with the same argv and
  // options `restart_delay` later, the delay doubling for each failure in a row up to
  // 30 s (a child that ran for a minute starts over at restart_delay). An exit code in
  // `fatal_exit_codes` (e.g. 2, bad input) stops everything as without the policy.
  bool restart_on_failure = false;
  std::chrono::milliseconds restart_delay{1000};
  std::vector<int> fatal_exit_codes;
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
  // The same with `options`; InvalidArgument when the log file cannot be opened (nothing
  // is started then).
  StatusOr<pid_t> Start(const std::string& name, const std::vector<std::string>& argv,
                        const ChildOptions& options);

  // Called (from Poll()/Wait(), on the calling thread) when a child fails while
  // supervision runs normally, with its name and whether it will be restarted.
  void set_on_failure(std::function<void(const std::string& name, bool will_restart)> callback) {
    on_failure_ = std::move(callback);
  }

  // One round of Wait()'s work: reaps children that have exited (a failure starts
  // stopping the others) and handles a pending SIGINT/SIGTERM, waiting up to `max_wait`
  // for a signal (also when no child runs). Returns true while supervision runs
  // normally: no child has failed and no stop has begun. Call Wait() once it returns
  // false.
  bool Poll(std::chrono::milliseconds max_wait);

  // Starts stopping every child as a forwarded SIGTERM would (e.g. one never became
  // ready). Wait() then returns `exit_code` unless a child had failed before.
  void Stop(int exit_code);

  // The name of the first child that failed (exited non-zero or was killed while not
  // being stopped); "" when none has.
  const std::string& first_failure() const { return first_failure_; }

  // Supervises until every child and descendant has exited. Returns 0 when all children
  // exited 0, or all ended after a forwarded stop signal; otherwise the first failing
  // child's exit code (128 + signal number when it was killed), at least 1.
  int Wait();

 private:
  struct Child {
    std::string name;
    pid_t pid = 0;
    bool running = true;
    int stop_stage = 0;
    // For restarts.
    std::vector<std::string> argv;
    ChildOptions options;
    std::chrono::steady_clock::time_point started_at;
    std::chrono::steady_clock::time_point restart_at;  // when !running and restart_pending
    bool restart_pending = false;
    int failures_in_a_row = 0;
  };
  // Forks and execs; InvalidArgument/Internal as Start().
  StatusOr<pid_t> Spawn(const std::string& name, const std::vector<std::string>& argv,
                        const ChildOptions& options);
  // Starts the children whose restart time has come.
  void RestartDue();
  void SignalAll(int sig);
  // Begins (or, for a repeated signal, re-sends) the stop with `sig`.
  void BeginStop(int sig);
  // Sends the stop signal to the highest stage that still runs, once per stage.
  void AdvanceStop();
  // Reaps what has exited; records the first failure and starts stopping on it.
  void Reap(bool* no_descendants_left);
  // Reaps, then waits up to `max_wait` for SIGINT/SIGTERM and acts on the stop
  // deadline. Returns true when no descendant is left.
  bool Step(std::chrono::milliseconds max_wait);

  SupervisorOptions options_;
  std::function<void(const std::string& name, bool will_restart)> on_failure_;
  std::vector<Child> children_;
  bool stopping_ = false;
  bool killed_ = false;
  int stop_signal_ = SIGTERM;
  int signalled_stage_ = 0;  // lowest stage signalled so far in this stop
  bool stage_signalled_ = false;
  int exit_code_ = 0;
  std::string first_failure_;
  std::chrono::steady_clock::time_point kill_deadline_;
};

}  // namespace tandem::ops
