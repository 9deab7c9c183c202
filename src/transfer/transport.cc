#include "transfer/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tandem::transfer {
namespace {

Status Errno(const std::string& what) {
  const int e = errno;
  if (e == EAGAIN || e == EWOULDBLOCK) return DeadlineExceededError(what + ": timed out");
  if (e == ECONNREFUSED || e == ECONNRESET || e == EPIPE || e == ENOENT || e == EHOSTUNREACH ||
      e == ENETUNREACH) {
    return UnavailableError(what + ": " + std::strerror(e));
  }
  return UnavailableError(what + ": " + std::strerror(e));
}

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = t.count() / 1000;
  tv.tv_usec = (t.count() % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

class SocketConnection final : public Connection {
 public:
  SocketConnection(int fd, const SocketOptions& options) : fd_(fd) { SetTimeouts(fd_, options.io_timeout); }
  ~SocketConnection() override { close(fd_); }
  using Connection::Send;

  Status Send(const void* const* data, const size_t* sizes, int count) override {
    std::vector<iovec> iov(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) iov[i] = {const_cast<void*>(data[i]), sizes[i]};
    size_t index = 0;
    while (index < iov.size()) {
      msghdr msg{};
      msg.msg_iov = iov.data() + index;
      msg.msg_iovlen = std::min<size_t>(iov.size() - index, IOV_MAX);
      const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("kv transfer send");
      }
      size_t left = static_cast<size_t>(n);
      while (left > 0 && index < iov.size()) {
        if (left >= iov[index].iov_len) {
          left -= iov[index].iov_len;
          ++index;
        } else {
          iov[index].iov_base = static_cast<char*>(iov[index].iov_base) + left;
          iov[index].iov_len -= left;
          left = 0;
        }
      }
      while (index < iov.size() && iov[index].iov_len == 0) ++index;
    }
    return Status::Ok();
  }

  Status Recv(void* data, size_t size) override {
    char* p = static_cast<char*>(data);
    while (size > 0) {
      const ssize_t n = recv(fd_, p, size, 0);
      if (n == 0) return UnavailableError("kv transfer: the peer closed the connection");
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("kv transfer receive");
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status SendWithFd(const void* data, size_t size, int fd) override {
    iovec iov{const_cast<void*>(data), size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do {
      n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Errno("kv transfer send (fd)");
    if (static_cast<size_t>(n) < size) return Send(static_cast<const char*>(data) + n, size - static_cast<size_t>(n));
    return Status::Ok();
  }

  Status RecvWithFd(void* data, size_t size, int* fd) override {
    *fd = -1;
    iovec iov{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n;
    do {
      n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n == 0) return UnavailableError("kv transfer: the peer closed the connection");
    if (n < 0) return Errno("kv transfer receive (fd)");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        std::memcpy(fd, CMSG_DATA(c), sizeof(int));
      }
    }
    if (static_cast<size_t>(n) < size) {
      Status rest = Recv(static_cast<char*>(data) + n, size - static_cast<size_t>(n));
      if (!rest.ok()) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return rest;
      }
    }
    return Status::Ok();
  }

  void Shutdown() override { shutdown(fd_, SHUT_RDWR); }

 private:
  int fd_;
};

// Connects with a timeout (non-blocking connect + poll), then makes the socket blocking.
Status ConnectWithTimeout(int fd, const sockaddr* addr, socklen_t len, std::chrono::milliseconds timeout,
                          const std::string& what) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS) return Errno("kv transfer connect to " + what);
    pollfd p{fd, POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, static_cast<int>(timeout.count()));
    } while (r < 0 && errno == EINTR);
    if (r == 0) return DeadlineExceededError("kv transfer connect to " + what + ": timed out");
    int err = 0;
    socklen_t err_len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) {
      errno = err;
      return Errno("kv transfer connect to " + what);
    }
  }
  fcntl(fd, F_SETFL, flags);
  return Status::Ok();
}

class FaultyConnection final : public Connection {
 public:
  FaultyConnection(std::unique_ptr<Connection> inner, FaultPlan plan) : inner_(std::move(inner)), plan_(plan) {}
  using Connection::Send;
  Status Send(const void* const* data, const size_t* sizes, int count) override {
    return inner_->Send(data, sizes, count);
  }
  Status Recv(void* data, size_t size) override {
    if (plan_.recv_delay.count() > 0) usleep(static_cast<useconds_t>(plan_.recv_delay.count() * 1000));
    if (plan_.fail_after_recv_bytes >= 0 && received_ + static_cast<int64_t>(size) > plan_.fail_after_recv_bytes) {
      inner_->Shutdown();
      return UnavailableError("kv transfer: injected connection failure");
    }
    TANDEM_RETURN_IF_ERROR(inner_->Recv(data, size));
    const int64_t at = plan_.corrupt_recv_byte_at;
    if (at >= received_ && at < received_ + static_cast<int64_t>(size)) static_cast<uint8_t*>(data)[at - received_] ^= 0xFF;
    received_ += static_cast<int64_t>(size);
    return Status::Ok();
  }
  Status SendWithFd(const void* data, size_t size, int fd) override { return inner_->SendWithFd(data, size, fd); }
  Status RecvWithFd(void* data, size_t size, int* fd) override {
    if (plan_.fail_after_recv_bytes >= 0 && received_ + static_cast<int64_t>(size) > plan_.fail_after_recv_bytes) {
      inner_->Shutdown();
      return UnavailableError("kv transfer: injected connection failure");
    }
    TANDEM_RETURN_IF_ERROR(inner_->RecvWithFd(data, size, fd));
    received_ += static_cast<int64_t>(size);
    return Status::Ok();
  }
  void Shutdown() override { inner_->Shutdown(); }

 private:
  std::unique_ptr<Connection> inner_;
  FaultPlan plan_;
  int64_t received_ = 0;
};

}  // namespace

std::string UnixSocketName(int port) { return std::string(1, '\0') + "tandem-kv-" + std::to_string(port); }

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  return (ntohl(a.s_addr) >> 24) == 127;
}

std::unique_ptr<Connection> MakeSocketConnection(int fd, const SocketOptions& options) {
  return std::make_unique<SocketConnection>(fd, options);
}

StatusOr<std::unique_ptr<Connection>> SocketTransport::Connect(const Endpoint& endpoint) {
  if (endpoint.port <= 0 || endpoint.port > 65535) {
    return InvalidArgumentError("kv transfer: bad port " + std::to_string(endpoint.port));
  }
  if (endpoint.unix_socket) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Errno("kv transfer socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = UnixSocketName(endpoint.port);
    std::memcpy(addr.sun_path, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    Status s = ConnectWithTimeout(fd, reinterpret_cast<sockaddr*>(&addr), len, options_.connect_timeout,
                                  "unix socket @" + name.substr(1));
    if (!s.ok()) {
      close(fd);
      return s;
    }
    return MakeSocketConnection(fd, options_);
  }
  std::string host = endpoint.host == "localhost" ? "127.0.0.1" : endpoint.host;
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_INET;
  if (host.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&storage);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(endpoint.port));
    if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) {
      return InvalidArgumentError("kv transfer: bad IP address \"" + endpoint.host + "\"");
    }
    family = AF_INET6;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&storage);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(endpoint.port));
    if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) {
      return InvalidArgumentError("kv transfer: bad IP address \"" + endpoint.host + "\"");
    }
    len = sizeof(sockaddr_in);
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("kv transfer socket");
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  Status s = ConnectWithTimeout(fd, reinterpret_cast<sockaddr*>(&storage), len, options_.connect_timeout,
                                host + ":" + std::to_string(endpoint.port));
  if (!s.ok()) {
    close(fd);
    return s;
  }
  return MakeSocketConnection(fd, options_);
}

StatusOr<std::unique_ptr<Connection>> FaultInjectingTransport::Connect(const Endpoint& endpoint) {
  connects_.fetch_add(1);
  if (plan_.fail_connect) return UnavailableError("kv transfer: injected connect failure");
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, inner_->Connect(endpoint));
  return std::unique_ptr<Connection>(std::make_unique<FaultyConnection>(std::move(c), plan_));
}

}  // namespace tandem::transfer
