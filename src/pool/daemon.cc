#include "pool/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace tandem::pool {
namespace {

std::string FileSafe(const std::string& address) {
  std::string s = address;
  for (char& c : s) {
    if (c == ':' || c == '/') c = '_';
  }
  return s;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == EPERM;
  // A zombie (exited, not yet reaped) is not alive.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close_paren = line.rfind(')');
  return !(close_paren != std::string::npos && close_paren + 2 < line.size() &&
           line[close_paren + 2] == 'Z');
}

}  // namespace

std::string PoolRunDir() {
  const char* env = std::getenv("TANDEM_POOL_RUN_DIR");
  if (env != nullptr && *env != '\0') return env;
  return "/tmp/tandem-pool-" + std::to_string(getuid());
}

std::string PidFilePath(const std::string& worker_address) {
  return PoolRunDir() + "/pool-" + FileSafe(worker_address) + ".pid";
}

std::string LogFilePath(const std::string& log_dir, const std::string& worker_address) {
  return (log_dir.empty() ? PoolRunDir() : log_dir) + "/pool-" + FileSafe(worker_address) + ".log";
}

int RunningPid(const std::string& worker_address) {
  std::ifstream in(PidFilePath(worker_address));
  int pid = 0;
  if (!(in >> pid)) return 0;
  return ProcessAlive(pid) ? pid : 0;
}

Status WritePidFile(const std::string& worker_address) {
  mkdir(PoolRunDir().c_str(), 0700);
  int other = RunningPid(worker_address);
  if (other != 0 && other != getpid()) {
    return FailedPreconditionError("a pool worker for " + worker_address +
                                   " is already running (pid " + std::to_string(other) + ")");
  }
  std::string path = PidFilePath(worker_address);
  std::ofstream out(path, std::ios::trunc);
  if (!(out << getpid() << "\n")) return UnavailableError("cannot write pid file " + path);
  return Status::Ok();
}

void RemovePidFile(const std::string& worker_address) {
  std::string path = PidFilePath(worker_address);
  std::ifstream in(path);
  int pid = 0;
  if ((in >> pid) && pid == getpid()) unlink(path.c_str());
}

Status Daemonize(const std::string& log_path, std::chrono::seconds timeout,
                 const std::function<int(const ReadyFn& ready)>& child, int* pid) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return InternalError("pipe: " + std::string(std::strerror(errno)));
  pid_t first = fork();
  if (first < 0) return InternalError("fork: " + std::string(std::strerror(errno)));
  if (first == 0) {
    // Child: new session, then fork again so the daemon is not a session leader and is
    // reparented to init when the intermediate exits.
    close(pipefd[0]);
    setsid();
    pid_t second = fork();
    if (second != 0) _exit(second < 0 ? 1 : 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    int write_fd = pipefd[1];
    bool reported = false;
    ReadyFn ready = [&](const Status& status) {
      if (reported) return;
      reported = true;
      std::string msg = status.ok() ? "OK " + std::to_string(getpid()) : status.ToString();
      if (write(write_fd, msg.data(), msg.size()) < 0) {
      }
      close(write_fd);
    };
    int rc = child(ready);
    if (!reported)
      ready(InternalError("worker exited during start-up (code " + std::to_string(rc) + ")"));
    _exit(rc);
  }
  close(pipefd[1]);
  int st = 0;
  waitpid(first, &st, 0);  // the intermediate exits at once
  std::string msg;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close(pipefd[0]);
      return DeadlineExceededError("the pool worker did not report ready within " +
                                   std::to_string(timeout.count()) + " s; see " + log_path);
    }
    pollfd p{pipefd[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[512];
    ssize_t n = read(pipefd[0], buf, sizeof(buf));
    if (n > 0) {
      msg.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EOF: the child reported (or died)
  }
  close(pipefd[0]);
  if (msg.rfind("OK ", 0) == 0) {
    *pid = std::atoi(msg.c_str() + 3);
    return Status::Ok();
  }
  if (msg.empty()) msg = "the pool worker died during start-up";
  return UnavailableError(msg + " (log: " + log_path + ")");
}

Status StopWorkerProcess(const std::string& worker_address, std::chrono::seconds timeout) {
  int pid = RunningPid(worker_address);
  if (pid == 0) return NotFoundError("no running pool worker for " + worker_address);
  kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!ProcessAlive(pid)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  return DeadlineExceededError("pool worker pid " + std::to_string(pid) + " did not stop within " +
                               std::to_string(timeout.count()) + " s; killed");
}

}  // namespace tandem::pool
