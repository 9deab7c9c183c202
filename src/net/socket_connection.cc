#include "net/socket_connection.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "net/fd_passing.h"
#include "net/socket_address.h"
#include "net/socket_error.h"

namespace tandem::net {
namespace {

timeval ToTimeval(std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

// Non-blocking connect bounded by `timeout`, then back to blocking mode.
Status ConnectWithTimeout(int fd, const SocketAddress& address, std::chrono::milliseconds timeout) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, address.get(), address.length) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN)
      return SocketErrorStatus("connect " + address.description, errno);
    pollfd p{fd, POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, static_cast<int>(timeout.count()));
    } while (r < 0 && errno == EINTR);
    if (r == 0) return DeadlineExceededError("connect " + address.description + ": timed out");
    int err = 0;
    socklen_t err_len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) return SocketErrorStatus("connect " + address.description, err);
  }
  fcntl(fd, F_SETFL, flags);
  return Status::Ok();
}

}  // namespace

Status SocketConnection::Send(const void* const* data, const size_t* sizes, int count) {
  std::vector<iovec> iov;
  iov.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (sizes[i] > 0) iov.push_back({const_cast<void*>(data[i]), sizes[i]});
  }
  size_t index = 0;
  while (index < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + index;
    msg.msg_iovlen = std::min<size_t>(iov.size() - index, IOV_MAX);
    const ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SocketErrorStatus("send", errno);
    }
    // Advance past what went out; a partly sent buffer continues where it stopped.
    size_t left = static_cast<size_t>(n);
    while (index < iov.size() && left >= iov[index].iov_len) left -= iov[index++].iov_len;
    if (left > 0) {
      iov[index].iov_base = static_cast<char*>(iov[index].iov_base) + left;
      iov[index].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status SocketConnection::Recv(void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd_.get(), p, size, 0);
    if (n == 0) return UnavailableError("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      return SocketErrorStatus("receive", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status SocketConnection::SendWithFd(const void* data, size_t size, int fd) {
  if (size == 0) return InvalidArgumentError("a descriptor must travel with at least one byte");
  TANDEM_ASSIGN_OR_RETURN(size_t sent, net::SendWithFd(fd_.get(), data, size, fd));
  // The descriptor went with the first byte; the rest are plain bytes.
  return sent < size ? Send(static_cast<const char*>(data) + sent, size - sent) : Status::Ok();
}

Status SocketConnection::RecvWithFd(void* data, size_t size, int* fd) {
  *fd = -1;
  if (size == 0) return Status::Ok();
  UniqueFd received;
  TANDEM_ASSIGN_OR_RETURN(size_t got, net::RecvWithFd(fd_.get(), data, size, &received));
  if (got < size) TANDEM_RETURN_IF_ERROR(Recv(static_cast<char*>(data) + got, size - got));
  *fd = received.Release();
  return Status::Ok();
}

void SocketConnection::Shutdown() { shutdown(fd_.get(), SHUT_RDWR); }

void SocketConnection::ShutdownWrite() { shutdown(fd_.get(), SHUT_WR); }

Status SocketConnection::SetIoTimeout(std::chrono::milliseconds timeout) {
  const timeval tv = ToTimeval(timeout);
  if (setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return SocketErrorStatus("setsockopt", errno);
  }
  return Status::Ok();
}

Status SocketConnection::SetSendTimeout(std::chrono::milliseconds timeout) {
  const timeval tv = ToTimeval(timeout);
  if (setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
    return SocketErrorStatus("setsockopt", errno);
  return Status::Ok();
}

void SocketConnection::DrainBeforeClose() {
  ShutdownWrite();
  SetIoTimeout(std::chrono::milliseconds(200)).ok();
  char buf[4096];
  for (int i = 0; i < 64 && recv(fd_.get(), buf, sizeof(buf), 0) > 0; ++i) {
  }
}

StatusOr<std::unique_ptr<SocketConnection>> ConnectTcp(const std::string& host, uint16_t port,
                                                       const ConnectOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(SocketAddress address, SocketAddress::Ip(host, port));
  UniqueFd fd(socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SocketErrorStatus("socket", errno);
  if (options.receive_buffer_bytes > 0) {
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &options.receive_buffer_bytes, sizeof(int));
  }
  TANDEM_RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), address, options.timeout));
  if (options.tcp_nodelay) {
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return std::make_unique<SocketConnection>(std::move(fd));
}

StatusOr<std::unique_ptr<SocketConnection>> ConnectUnix(const std::string& name,
                                                        std::chrono::milliseconds timeout) {
  const SocketAddress address = SocketAddress::AbstractUnix(name);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SocketErrorStatus("socket", errno);
  TANDEM_RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), address, timeout));
  return std::make_unique<SocketConnection>(std::move(fd));
}

}  // namespace tandem::net
