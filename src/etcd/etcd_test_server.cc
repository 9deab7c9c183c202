#include "etcd/etcd_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "etcd/http_etcd_client.h"

namespace tandem::etcd {
namespace {

std::string EtcdBinary() {
  const char* env = std::getenv("TANDEM_ETCD_BIN");
  return env != nullptr ? env : "/usr/bin/etcd";
}

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

bool EtcdTestServer::Available() { return access(EtcdBinary().c_str(), X_OK) == 0; }

EtcdTestServer::EtcdTestServer() {
  char tmpl[] = "/tmp/tandem-etcd-test-XXXXXX";
  dir_ = mkdtemp(tmpl);
  client_port_ = FreePort();
  peer_port_ = FreePort();
}

EtcdTestServer::~EtcdTestServer() {
  Stop(/*kill=*/true);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string EtcdTestServer::endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

Status EtcdTestServer::Start() {
  Status s = StartOnce();
  for (int attempt = 1; !started_ && !s.ok() && s.code() == StatusCode::kUnavailable && attempt < 4; ++attempt) {
    client_port_ = FreePort();
    peer_port_ = FreePort();
    s = StartOnce();
  }
  if (s.ok()) started_ = true;
  return s;
}

Status EtcdTestServer::StartOnce() {
  if (pid_ > 0) return FailedPreconditionError("etcd already running");
  std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
  std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> args = {EtcdBinary(),   "--name",
                                   "test",         "--data-dir",
                                   dir_ + "/data", "--listen-client-urls",
                                   client,         "--advertise-client-urls",
                                   client,         "--listen-peer-urls",
                                   peer,           "--initial-advertise-peer-urls",
                                   peer,           "--initial-cluster",
                                   "test=" + peer};
  std::string log_path = dir_ + "/etcd.log";
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid_ < 0) return InternalError("fork failed");
  auto client_or = HttpEtcdClient::Create({endpoint(), std::chrono::milliseconds(500)});
  if (!client_or.ok()) return client_or.status();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if ((*client_or)->Range("health", "").ok()) return Status::Ok();
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return UnavailableError("etcd exited during start-up; see " + dir_ + "/etcd.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return UnavailableError("etcd did not answer within 20 s");
}

void EtcdTestServer::Stop(bool kill) {
  if (pid_ <= 0) return;
  ::kill(pid_, kill ? SIGKILL : SIGTERM);
  int st = 0;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

}  // namespace tandem::etcd
