#include "ops/process_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/logging.h"

namespace tandem::ops {
namespace {

sigset_t SupervisedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  return set;
}

// The next of `set`'s signals within `max_wait` (blocked signals, taken with
// sigtimedwait), or -1.
int WaitForSignal(const sigset_t& set, std::chrono::milliseconds max_wait) {
  const auto wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(max_wait).count();
  timespec wait_time{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
  siginfo_t info;
  return sigtimedwait(&set, &info, &wait_time);
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// This process's environment with `overrides` ("NAME=VALUE") replacing or adding entries.
// Built before fork: the child of a multi-threaded process may not allocate.
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(
        overrides.begin(), overrides.end(),
        [&](const std::string& o) { return std::string_view(o).substr(0, o.find('=')) == name; });
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options) : options_(options) {
  sigset_t set = SupervisedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Grandchildren orphaned by a child (a template script that died first) are
  // re-parented to us, so Wait() can reap them and knows when the tree is gone.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

StatusOr<pid_t> ProcessSupervisor::Start(const std::string& name,
                                         const std::vector<std::string>& argv) {
  return Start(name, argv, ChildOptions{});
}

StatusOr<pid_t> ProcessSupervisor::Start(const std::string& name,
                                         const std::vector<std::string>& argv,
                                         const ChildOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(pid_t pid, Spawn(name, argv, options));
  Child child;
  child.name = name;
  child.pid = pid;
  child.stop_stage = options.stop_stage;
  child.argv = argv;
  child.options = options;
  child.started_at = std::chrono::steady_clock::now();
  children_.push_back(std::move(child));
  if (stopping_) kill(-pid, stop_signal_);  // started after a stop began: stop it too
  return pid;
}

StatusOr<pid_t> ProcessSupervisor::Spawn(const std::string& name,
                                         const std::vector<std::string>& argv,
                                         const ChildOptions& options) {
  if (argv.empty()) return InvalidArgumentError(name + ": empty command line");
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return InvalidArgumentError(name + ": cannot open log file " + options.log_path + ": " +
                                  strerror(errno));
    }
  }
  std::vector<char*> args = CStrings(argv);
  const std::vector<std::string> env_strings =
      options.env.empty() ? std::vector<std::string>{} : MergedEnvironment(options.env);
  std::vector<char*> env = CStrings(env_strings);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int fork_errno = errno;
    if (log_fd >= 0) close(log_fd);
    return InternalError(std::string("fork: ") + strerror(fork_errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);  // tandem ignores it (cli/main.cc); an ignored signal survives exec
    if (options.stop_with_supervisor) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);  // the supervisor died before prctl
    }
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copies
      dup2(log_fd, STDERR_FILENO);
    }
    if (options.env.empty()) {
      execvp(args[0], args.data());
    } else {
      execvpe(args[0], args.data(), env.data());
    }
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
  setpgid(pid, pid);  // also here, so a signal sent right after Start reaches the group
  TANDEM_LOG(INFO) << name << " started (pid " << pid << ")";
  return pid;
}

void ProcessSupervisor::RestartDue() {
  const auto now = std::chrono::steady_clock::now();
  for (Child& child : children_) {
    if (!child.restart_pending || stopping_ || now < child.restart_at) continue;
    child.restart_pending = false;
    StatusOr<pid_t> pid = Spawn(child.name, child.argv, child.options);
    if (!pid.ok()) {
      TANDEM_LOG(ERROR) << child.name << ": restart failed: " << pid.status().ToString();
      if (first_failure_.empty()) first_failure_ = child.name;
      if (exit_code_ == 0) exit_code_ = 1;
      BeginStop(SIGTERM);
      return;
    }
    child.pid = *pid;
    child.running = true;
    child.started_at = now;
  }
}

void ProcessSupervisor::SignalAll(int sig) {
  // Groups whose leader has exited may still hold the engine the leader started.
  for (const Child& child : children_) kill(-child.pid, sig);
}

void ProcessSupervisor::BeginStop(int sig) {
  if (!stopping_) kill_deadline_ = std::chrono::steady_clock::now() + options_.stop_timeout;
  stopping_ = true;
  stop_signal_ = sig;
  stage_signalled_ = false;  // a repeated signal is forwarded again
  AdvanceStop();
}

void ProcessSupervisor::AdvanceStop() {
  if (!stopping_ || killed_) return;
  int top = INT_MIN;
  for (const Child& child : children_) {
    if (child.running) top = std::max(top, child.stop_stage);
  }
  if (top == INT_MIN) return;
  if (stage_signalled_ && top >= signalled_stage_) return;
  stage_signalled_ = true;
  signalled_stage_ = top;
  for (const Child& child : children_) {
    if (child.stop_stage >= top) kill(-child.pid, stop_signal_);
  }
}

void ProcessSupervisor::Reap(bool* no_descendants_left) {
  *no_descendants_left = false;
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) return;
    if (pid < 0) {
      *no_descendants_left = errno == ECHILD;
      return;
    }
    for (Child& child : children_) {
      if (child.pid != pid) continue;
      child.running = false;
      const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      const bool stop_signal =
          WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT);
      if (clean || (stopping_ && stop_signal)) {  // stopped by us: expected
        TANDEM_LOG(INFO) << child.name << " " << DescribeStatus(status);
        break;
      }
      TANDEM_LOG(ERROR) << child.name << " " << DescribeStatus(status);
      const ChildOptions& o = child.options;
      const bool fatal =
          WIFEXITED(status) && std::find(o.fatal_exit_codes.begin(), o.fatal_exit_codes.end(),
                                         WEXITSTATUS(status)) != o.fatal_exit_codes.end();
      if (o.restart_on_failure && !fatal && !stopping_) {
        const auto now = std::chrono::steady_clock::now();
        if (now - child.started_at >= std::chrono::minutes(1)) child.failures_in_a_row = 0;
        auto delay = o.restart_delay;
        for (int i = 0; i < child.failures_in_a_row && delay < std::chrono::seconds(30); ++i)
          delay *= 2;
        delay = std::min<std::chrono::milliseconds>(delay, std::chrono::seconds(30));
        ++child.failures_in_a_row;
        child.restart_pending = true;
        child.restart_at = now + delay;
        TANDEM_LOG(WARNING) << child.name << " will be restarted in " << delay.count() << " ms";
        if (on_failure_) on_failure_(child.name, true);
        break;
      }
      if (on_failure_ && !stopping_) on_failure_(child.name, false);
      if (first_failure_.empty()) first_failure_ = child.name;
      if (exit_code_ == 0) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (!stopping_) {
        TANDEM_LOG(ERROR) << "stopping the other ranks";
        BeginStop(SIGTERM);
      }
      break;
    }
  }
}

bool ProcessSupervisor::Step(std::chrono::milliseconds max_wait) {
  const sigset_t set = SupervisedSignals();
  bool none_left = false;
  Reap(&none_left);
  const bool restart_pending =
      !stopping_ && std::any_of(children_.begin(), children_.end(),
                                [](const Child& c) { return c.restart_pending; });
  if (none_left && !restart_pending) return true;
  AdvanceStop();  // a stage may have emptied
  RestartDue();
  const int sig = WaitForSignal(set, max_wait);
  if (sig == SIGINT || sig == SIGTERM) {
    TANDEM_LOG(INFO) << "received " << strsignal(sig) << "; forwarding it to every rank";
    BeginStop(sig);
  }
  if (stopping_ && !killed_ && std::chrono::steady_clock::now() >= kill_deadline_) {
    TANDEM_LOG(WARNING) << "ranks still running " << options_.stop_timeout.count()
                        << " ms after the stop signal; killing them";
    killed_ = true;
    SignalAll(SIGKILL);
    if (exit_code_ == 0) exit_code_ = 128 + SIGKILL;
  }
  return false;
}

bool ProcessSupervisor::Poll(std::chrono::milliseconds max_wait) {
  if (Step(max_wait) && !stopping_) {
    // No child (yet, or any more): still wait, and still honour a stop signal.
    const int sig = WaitForSignal(SupervisedSignals(), max_wait);
    if (sig == SIGINT || sig == SIGTERM) {
      TANDEM_LOG(INFO) << "received " << strsignal(sig) << "; stopping";
      BeginStop(sig);
    }
  }
  return !stopping_;
}

void ProcessSupervisor::Stop(int exit_code) {
  if (exit_code_ == 0) exit_code_ = exit_code;
  if (!stopping_) BeginStop(SIGTERM);
}

int ProcessSupervisor::Wait() {
  // 200 ms: also wakes up for the kill deadline.
  while (!Step(std::chrono::milliseconds(200))) {
  }
  return exit_code_;
}

}  // namespace tandem::ops
