#include "ops/process_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "stopped";
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
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return InternalError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a signal sent right after Start reaches the group
  children_.push_back({name, pid, true});
  TANDEM_LOG(INFO) << name << " started (pid " << pid << ")";
  return pid;
}

void ProcessSupervisor::SignalAll(int sig) {
  // Groups whose leader has exited may still hold the engine the leader started.
  for (const Child& child : children_) kill(-child.pid, sig);
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
      if (exit_code_ == 0) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (!stopping_) {
        TANDEM_LOG(ERROR) << "stopping the other ranks";
        stopping_ = true;
        kill_deadline_ = std::chrono::steady_clock::now() + options_.stop_timeout;
        SignalAll(SIGTERM);
      }
      break;
    }
  }
}

int ProcessSupervisor::Wait() {
  const sigset_t set = SupervisedSignals();
  while (true) {
    bool none_left = false;
    Reap(&none_left);
    if (none_left) break;
    timespec wait_time{0, 200'000'000};  // also wakes up for the kill deadline
    siginfo_t info;
    const int sig = sigtimedwait(&set, &info, &wait_time);
    if (sig == SIGINT || sig == SIGTERM) {
      TANDEM_LOG(INFO) << "received " << strsignal(sig) << "; forwarding it to every rank";
      if (!stopping_) kill_deadline_ = std::chrono::steady_clock::now() + options_.stop_timeout;
      stopping_ = true;
      SignalAll(sig);
    }
    if (stopping_ && !killed_ && std::chrono::steady_clock::now() >= kill_deadline_) {
      TANDEM_LOG(WARNING) << "ranks still running " << options_.stop_timeout.count()
                          << " ms after the stop signal; killing them";
      killed_ = true;
      SignalAll(SIGKILL);
      if (exit_code_ == 0) exit_code_ = 128 + SIGKILL;
    }
  }
  return exit_code_;
}

}  // namespace tandem::ops
