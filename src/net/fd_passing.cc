#include "net/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "net/socket_error.h"

namespace tandem::net {

StatusOr<size_t> SendWithFd(int socket_fd, const void* data, size_t size, int pass_fd) {
  iovec iov{const_cast<void*>(data), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
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
    n = sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketErrorStatus("send (with a descriptor)", errno);
  return static_cast<size_t>(n);
}

StatusOr<size_t> RecvWithFd(int socket_fd, void* data, size_t size, UniqueFd* received) {
  iovec iov{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketErrorStatus("receive (with a descriptor)", errno);
  // Descriptors are taken before looking at n: a message may carry one with no bytes
  // left to read, and one not taken here would leak.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len < CMSG_LEN(sizeof(int)))
      continue;
    int passed = -1;
    std::memcpy(&passed, CMSG_DATA(c), sizeof(int));
    if (received != nullptr) {
      received->Reset(passed);
    } else {
      close(passed);
    }
  }
  if (n == 0) return UnavailableError("connection closed by peer");
  return static_cast<size_t>(n);
}

}  // namespace tandem::net
