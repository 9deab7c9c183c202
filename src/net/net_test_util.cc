#include "net/net_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace tandem::net::testing {

using Clock = std::chrono::steady_clock;

RawConnection::RawConnection(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fd_ = fd;
}

RawConnection::~RawConnection() { Close(); }

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(other.fd_), pending_(std::move(other.pending_)) {
  other.fd_ = -1;
}

void RawConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

long RawConnection::ReadSome(Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) pending_.append(buf, static_cast<size_t>(n));
    return n < 0 ? -1 : static_cast<long>(n);
  }
}

std::string RawConnection::ReadUntil(std::string_view needle, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (pending_.find(needle) == std::string::npos) {
    if (ReadSome(deadline) <= 0) break;
  }
  size_t pos = pending_.find(needle);
  size_t take = pos == std::string::npos ? pending_.size() : pos + needle.size();
  std::string out = pending_.substr(0, take);
  pending_.erase(0, take);
  return out;
}

std::string RawConnection::ReadResponse(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  size_t head_end;
  while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (ReadSome(deadline) <= 0) return std::exchange(pending_, {});
  }
  // Skip interim 1xx responses.
  if (pending_.compare(0, 10, "HTTP/1.1 1") == 0) {
    pending_.erase(0, head_end + 4);
    return ReadResponse(timeout);
  }
  std::string head = pending_.substr(0, head_end + 4);
  std::string lower = head;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  size_t cl = lower.find("content-length:");
  if (cl == std::string::npos) {
    while (ReadSome(deadline) > 0) {
    }
    return std::exchange(pending_, {});
  }
  size_t length = std::strtoul(lower.c_str() + cl + 15, nullptr, 10);
  while (pending_.size() < head.size() + length) {
    if (ReadSome(deadline) <= 0) break;
  }
  size_t take = std::min(pending_.size(), head.size() + length);
  std::string out = pending_.substr(0, take);
  pending_.erase(0, take);
  return out;
}

bool RawConnection::WaitClosed(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    long n = ReadSome(deadline);
    pending_.clear();
    if (n == 0) return true;
    if (n < 0) return Clock::now() < deadline;  // a reset counts as closed
  }
}

int StatusOf(std::string_view response) {
  if (response.size() < 12 || response.substr(0, 5) != "HTTP/") return 0;
  return std::atoi(std::string(response.substr(9, 3)).c_str());
}

std::string BodyOf(std::string_view response) {
  size_t pos = response.find("\r\n\r\n");
  return pos == std::string_view::npos ? std::string() : std::string(response.substr(pos + 4));
}

long RaiseFdLimit(long want) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (static_cast<long>(limit.rlim_cur) < want) {
    limit.rlim_cur = std::min<rlim_t>(static_cast<rlim_t>(want), limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<long>(limit.rlim_cur);
}

}  // namespace tandem::net::testing
