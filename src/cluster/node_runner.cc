#include "cluster/node_runner.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "cluster/readiness_probe.h"
#include "common/logging.h"
#include "net/http_client.h"
#include "ops/process_supervisor.h"

namespace tandem::cluster {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One node's start-up: the supervisor, the probes and the state file together.
class NodeStartup {
 public:
  NodeStartup(const NodePlan& plan, const UpOptions& options)
      : plan_(plan), options_(options), supervisor_(ops::SupervisorOptions{options.stop_timeout}) {
    // After the supervisor: the client's I/O threads inherit the blocked signal mask.
    http_ = std::make_unique<net::HttpClient>();
    state_.cluster = plan.cluster;
    state_.node = plan.node;
    state_.status = "starting";
    state_.supervisor = SelfIdentity();
    state_.logs_dir = plan.logs_dir;
    state_.proxy_url = plan.proxy_url;
  }

  int Run() {
    const Clock::time_point start = Clock::now();
    if (Status s = WriteClusterState(plan_.state_path, state_); !s.ok()) {
      TANDEM_LOG(ERROR) << s.message();
      return 1;
    }
    bool ready = true;
    std::set<int> levels;
    for (const ServicePlan& s : plan_.services) levels.insert(s.level);
    for (const RemoteDependency& d : plan_.remote) levels.insert(d.before_level);
    for (int level : levels) {
      if (!(ready = StartLevel(level))) break;
    }
    if (ready) {
      state_.status = "ready";
      WriteState();
      TANDEM_LOG(INFO) << "node " << plan_.node << " is ready (" << SecondsSince(start) << " s)";
      if (options_.on_ready) options_.on_ready(state_);
    }
    const int code = supervisor_.Wait();
    if (!supervisor_.first_failure().empty()) ReportFailure(supervisor_.first_failure());
    std::remove(plan_.state_path.c_str());
    TANDEM_LOG(INFO) << "node " << plan_.node << ": every service has stopped; exit code " << code;
    return code;
  }

 private:
  void WriteState() {
    if (Status s = WriteClusterState(plan_.state_path, state_); !s.ok())
      TANDEM_LOG(WARNING) << s.message();
  }

  // Waits for the remote dependencies of `level`, starts its services, waits until all
  // are ready. False when start-up must end (a failure, a signal, a timeout).
  bool StartLevel(int level) {
    for (const RemoteDependency& d : plan_.remote) {
      if (d.before_level == level && !WaitReady({{d.name, &d.ready, ""}})) return false;
    }
    std::vector<Pending> pending;
    for (const ServicePlan& s : plan_.services) {
      if (s.level != level) continue;
      if (!Start(s)) return false;
      pending.push_back({s.name, &s.ready, s.log_path});
    }
    return WaitReady(pending);
  }

  bool Start(const ServicePlan& s) {
    std::error_code ec;
    for (const std::string& dir : s.make_dirs) std::filesystem::create_directories(dir, ec);
    for (const std::string& file : s.remove_files) std::filesystem::remove(file, ec);
    ops::ChildOptions child;
    child.log_path = s.log_path;
    child.env = s.env;
    child.stop_stage = s.level;
    child.stop_with_supervisor = true;  // tandem up killed: the services stop too
    StatusOr<pid_t> pid = supervisor_.Start(s.name, s.argv, child);
    if (!pid.ok()) {
      TANDEM_LOG(ERROR) << pid.status().message();
      supervisor_.Stop(1);
      return false;
    }
    ServiceState service{s.name, ServiceKindName(s.kind), {*pid, 0}, s.ports, s.log_path};
    // The child may not have exec'd yet, but its start time is fixed at fork.
    if (StatusOr<ProcessIdentity> id = IdentifyProcess(*pid); id.ok()) service.process = *id;
    state_.services.push_back(std::move(service));
    WriteState();
    TANDEM_LOG(INFO) << s.name << ": " << ShellQuote(s.argv) << "  (log " << s.log_path << ")";
    return true;
  }

  struct Pending {
    std::string name;
    const ReadinessCheck* check;
    std::string log_path;  // "" for a remote dependency
  };

  bool WaitReady(std::vector<Pending> pending) {
    const Clock::time_point start = Clock::now();
    std::vector<std::string> last_error(pending.size());
    while (!pending.empty()) {
      for (size_t i = 0; i < pending.size();) {
        Status s = ProbeOnce(*pending[i].check, *http_);
        if (s.ok()) {
          TANDEM_LOG(INFO) << pending[i].name << " is ready (" << SecondsSince(start) << " s)";
          pending.erase(pending.begin() + static_cast<long>(i));
          last_error.erase(last_error.begin() + static_cast<long>(i));
          continue;
        }
        last_error[i] = s.message();
        if (SecondsSince(start) > pending[i].check->timeout_s) {
          TANDEM_LOG(ERROR) << pending[i].name << " is not ready after "
                            << pending[i].check->timeout_s << " s (" << pending[i].check->Describe()
                            << ": " << last_error[i] << "); stopping the node";
          if (!pending[i].log_path.empty()) ReportFailure(pending[i].name);
          supervisor_.Stop(1);
          return false;
        }
        ++i;
      }
      if (pending.empty()) break;
      if (!supervisor_.Poll(options_.poll_interval)) return false;  // a failure or a signal
    }
    return true;
  }

  void ReportFailure(const std::string& name) {
    for (const ServicePlan& s : plan_.services) {
      if (s.name != name) continue;
      const std::string tail = TailOfFile(s.log_path, 20);
      std::cerr << "---- last lines of " << s.log_path << " ----\n"
                << tail << (tail.empty() || tail.back() == '\n' ? "" : "\n") << "----" << std::endl;
    }
  }

  const NodePlan& plan_;
  const UpOptions& options_;
  ops::ProcessSupervisor supervisor_;
  std::unique_ptr<net::HttpClient> http_;
  ClusterState state_;
};

void MakeNodeDirs(const NodePlan& plan) {
  std::error_code ec;
  std::filesystem::create_directories(plan.logs_dir, ec);
}

// Binds host:port (TCP, SO_REUSEADDR as servers do) and lets go. Returns 0 when it
// could, else the errno of the failure (EAI_* resolution errors as EADDRNOTAVAIL).
int TryBind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0) {
    return EADDRNOTAVAIL;
  }
  int error = 0;
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) {
    error = errno;
  } else {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) error = errno;
    close(fd);
  }
  freeaddrinfo(found);
  return error;
}

}  // namespace

Status CheckPortsFree(const NodePlan& plan) {
  for (const ServicePlan& s : plan.services) {
    for (const auto& [what, port] : s.ports) {
      const int error = TryBind(s.bind_host, port);
      if (error == 0) continue;
      const std::string hint =
          error == EADDRNOTAVAIL
              ? "this host has no address " + s.bind_host + "; is this host node " + plan.node + "?"
              : "another process uses it; stop it or change the port in the cluster file";
      return FailedPreconditionError(s.name + ": cannot listen on " + s.bind_host + ":" +
                                     std::to_string(port) + " (" + what +
                                     " port): " + strerror(error) + " (" + hint + ")");
    }
  }
  return Status::Ok();
}

std::string TailOfFile(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(std::move(line));
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

Status CheckNodeNotRunning(const std::string& state_path) {
  StatusOr<ClusterState> state = ReadClusterState(state_path);
  if (!state.ok()) return Status::Ok();  // none, or unreadable: nothing we could stop anyway
  if (IsRunning(state->supervisor)) {
    return FailedPreconditionError(
        "node " + state->node + " of cluster " + state->cluster + " is already up (tandem up pid " +
        std::to_string(state->supervisor.pid) + "); run tandem down first");
  }
  std::string pids;
  for (const ServiceState& s : state->services) {
    if (IsRunning(s.process))
      pids += (pids.empty() ? "" : ", ") + s.name + " pid " + std::to_string(s.process.pid);
  }
  if (!pids.empty()) {
    return FailedPreconditionError("services of an earlier tandem up of node " + state->node +
                                   " still run (" + pids + "); run tandem down first");
  }
  return Status::Ok();
}

int RunNode(const NodePlan& plan, const UpOptions& options) {
  MakeNodeDirs(plan);
  NodeStartup startup(plan, options);
  return startup.Run();
}

int RunNodeDetached(const NodePlan& plan, const UpOptions& options) {
  MakeNodeDirs(plan);
  const std::string up_log = plan.logs_dir + "/up.log";
  int ready_pipe[2];
  if (pipe2(ready_pipe, O_CLOEXEC) != 0) {
    TANDEM_LOG(ERROR) << "pipe: " << strerror(errno);
    return 1;
  }
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    TANDEM_LOG(ERROR) << "fork: " << strerror(errno);
    return 1;
  }
  if (pid == 0) {  // the background tandem up
    close(ready_pipe[0]);
    setsid();
    const int null_fd = open("/dev/null", O_RDONLY);
    const int log_fd = open(up_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    UpOptions child_options = options;
    const int ready_fd = ready_pipe[1];
    child_options.on_ready = [ready_fd](const ClusterState&) {
      const char ok = 1;
      ssize_t n = write(ready_fd, &ok, 1);
      (void)n;
      close(ready_fd);
    };
    _exit(RunNode(plan, child_options));
  }
  close(ready_pipe[1]);
  char byte = 0;
  ssize_t n;
  do {
    n = read(ready_pipe[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(ready_pipe[0]);
  if (n == 1) {
    StatusOr<ClusterState> state = ReadClusterState(plan.state_path);
    if (options.on_ready && state.ok()) options.on_ready(*state);
    return 0;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::cerr << "tandem up: node " << plan.node << " did not come up; the end of " << up_log << ":\n"
            << TailOfFile(up_log, 40);
  return 1;
}

}  // namespace tandem::cluster
