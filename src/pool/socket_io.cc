#include "pool/socket_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

namespace tandem::pool {
namespace {

Status ErrnoStatus(const std::string& what, int err) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT) return DeadlineExceededError(msg);
  return UnavailableError(msg);
}

sockaddr_un UnixAddress(const std::string& name, socklen_t* len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: sun_path starts with '\0' and the length is exact.
  size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return addr;
}

// Non-blocking connect bounded by `timeout`, then back to blocking mode.
Status ConnectWithTimeout(int fd, const sockaddr* addr, socklen_t len,
                          std::chrono::milliseconds timeout, const std::string& what) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) return ErrnoStatus("connect " + what, errno);
    pollfd p{fd, POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, static_cast<int>(timeout.count()));
    } while (r < 0 && errno == EINTR);
    if (r == 0) return DeadlineExceededError("connect " + what + ": timed out");
    int err = 0;
    socklen_t elen = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err != 0) return ErrnoStatus("connect " + what, err);
  }
  fcntl(fd, F_SETFL, flags);
  return Status::Ok();
}

Status WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("send", errno);
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ReadAll(int fd, char* data, size_t len) {
  while (len > 0) {
    ssize_t n = recv(fd, data, len, 0);
    if (n == 0) return UnavailableError("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("recv", errno);
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

StatusOr<HostPort> ParseHostPort(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("address '" + std::string(text) + "' is not IP:PORT");
  }
  int port = 0;
  auto tail = text.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), port);
  if (ec != std::errc() || ptr != tail.data() + tail.size() || port <= 0 || port > 65535) {
    return InvalidArgumentError("address '" + std::string(text) + "' has a bad port");
  }
  HostPort hp{std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
  in_addr a{};
  if (inet_pton(AF_INET, hp.host.c_str(), &a) != 1) {
    return InvalidArgumentError("address '" + std::string(text) +
                                "': host must be an IPv4 address");
  }
  return hp;
}

std::string UnixSocketName(const std::string& worker_address) {
  return "tandem-pool/" + worker_address;
}

StatusOr<UniqueFd> ConnectTcp(const HostPort& address, std::chrono::milliseconds timeout) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(address.port);
  inet_pton(AF_INET, address.host.c_str(), &addr.sin_addr);
  TANDEM_RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), reinterpret_cast<sockaddr*>(&addr),
                                            sizeof(addr), timeout, address.ToString()));
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

StatusOr<UniqueFd> ConnectUnix(const std::string& name, std::chrono::milliseconds timeout) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  socklen_t len = 0;
  sockaddr_un addr = UnixAddress(name, &len);
  TANDEM_RETURN_IF_ERROR(ConnectWithTimeout(fd.get(), reinterpret_cast<sockaddr*>(&addr), len,
                                            timeout, "unix:@" + name));
  return fd;
}

StatusOr<UniqueFd> ListenTcp(const HostPort& address, int backlog) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(address.port);
  inet_pton(AF_INET, address.host.c_str(), &addr.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return UnavailableError("bind " + address.ToString() + ": " + std::strerror(errno));
  }
  if (listen(fd.get(), backlog) != 0) return ErrnoStatus("listen", errno);
  return fd;
}

StatusOr<UniqueFd> ListenUnix(const std::string& name, int backlog) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  socklen_t len = 0;
  sockaddr_un addr = UnixAddress(name, &len);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return UnavailableError("bind unix:@" + name + ": " + std::strerror(errno));
  }
  if (listen(fd.get(), backlog) != 0) return ErrnoStatus("listen", errno);
  return fd;
}

Status SetIoTimeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return ErrnoStatus("setsockopt", errno);
  }
  return Status::Ok();
}

Status SendFrame(int fd, FrameHeader header, std::string_view body, int pass_fd) {
  if (body.size() > kMaxBodyBytes) return InvalidArgumentError("frame body too large");
  header.body_len = static_cast<uint32_t>(body.size());
  uint8_t head[kHeaderBytes];
  EncodeHeader(header, head);
  iovec iov[2] = {{head, kHeaderBytes}, {const_cast<char*>(body.data()), body.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = body.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("send", errno);
  // Finish a partial send without the control message (it went with the first byte).
  size_t sent = static_cast<size_t>(n);
  if (sent < kHeaderBytes) {
    TANDEM_RETURN_IF_ERROR(WriteAll(fd, reinterpret_cast<char*>(head) + sent, kHeaderBytes - sent));
    sent = kHeaderBytes;
  }
  size_t body_sent = sent - kHeaderBytes;
  return WriteAll(fd, body.data() + body_sent, body.size() - body_sent);
}

Status SendFrameParts(int fd, FrameHeader header, const std::vector<std::string_view>& parts) {
  if (parts.size() > 1024) return InvalidArgumentError("too many frame parts");
  uint64_t total = 0;
  for (auto p : parts) total += p.size();
  if (total > kMaxBodyBytes) return InvalidArgumentError("frame body too large");
  header.body_len = static_cast<uint32_t>(total);
  uint8_t head[kHeaderBytes];
  EncodeHeader(header, head);
  std::vector<iovec> iov;
  iov.reserve(parts.size() + 1);
  iov.push_back({head, kHeaderBytes});
  for (auto p : parts) {
    if (!p.empty()) iov.push_back({const_cast<char*>(p.data()), p.size()});
  }
  size_t first = 0;
  while (first < iov.size()) {
    ssize_t n = writev(fd, iov.data() + first, static_cast<int>(iov.size() - first));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("send", errno);
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status RecvFrame(int fd, FrameHeader* header, std::string* body, UniqueFd* received_fd,
                 uint32_t max_body) {
  uint8_t head[kHeaderBytes];
  iovec iov{head, kHeaderBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return UnavailableError("connection closed by peer");
  if (n < 0) return ErrnoStatus("recv", errno);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(c), sizeof(int));
      if (received_fd != nullptr)
        received_fd->Reset(passed);
      else
        close(passed);
    }
  }
  if (static_cast<size_t>(n) < kHeaderBytes) {
    TANDEM_RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(head) + n, kHeaderBytes - n));
  }
  TANDEM_RETURN_IF_ERROR(DecodeHeader(head, header));
  if (header->body_len > max_body) {
    return InvalidArgumentError("frame body of " + std::to_string(header->body_len) +
                                " bytes exceeds the limit of " + std::to_string(max_body));
  }
  body->resize(header->body_len);
  return ReadAll(fd, body->data(), header->body_len);
}

}  // namespace tandem::pool
