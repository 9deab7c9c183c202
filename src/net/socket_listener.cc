#include "net/socket_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/peer_credentials.h"
#include "net/socket_address.h"

namespace tandem::net {
namespace {

StatusOr<UniqueFd> BindAndListen(const SocketAddress& address, int backlog, bool reuse_address) {
  UniqueFd fd(socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return InternalError(std::string("socket: ") + std::strerror(errno));
  if (reuse_address) {
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  if (bind(fd.get(), address.get(), address.length) != 0) {
    return UnavailableError("cannot bind " + address.description + ": " + std::strerror(errno));
  }
  if (listen(fd.get(), backlog) != 0) {
    return UnavailableError("listen on " + address.description + ": " + std::strerror(errno));
  }
  return fd;
}

StatusOr<UniqueFd> MakeWakeFd() {
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return InternalError(std::string("eventfd: ") + std::strerror(errno));
  return wake;
}

}  // namespace

SocketListener::SocketListener(UniqueFd fd, UniqueFd wake, bool is_unix, uint16_t port,
                               const SocketListenerOptions& options)
    : fd_(std::move(fd)),
      wake_(std::move(wake)),
      is_unix_(is_unix),
      port_(port),
      options_(options) {}

SocketListener::~SocketListener() = default;

StatusOr<std::unique_ptr<SocketListener>> SocketListener::ListenTcp(
    const std::string& host, uint16_t port, const SocketListenerOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(SocketAddress address, SocketAddress::Ip(host, port));
  TANDEM_ASSIGN_OR_RETURN(UniqueFd fd,
                          BindAndListen(address, options.backlog, /*reuse_address=*/true));
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t bound_port =
      ntohs(address.family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  TANDEM_ASSIGN_OR_RETURN(UniqueFd wake, MakeWakeFd());
  return std::unique_ptr<SocketListener>(
      new SocketListener(std::move(fd), std::move(wake), /*is_unix=*/false, bound_port, options));
}

StatusOr<std::unique_ptr<SocketListener>> SocketListener::ListenUnix(
    const std::string& name, const SocketListenerOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(UniqueFd fd, BindAndListen(SocketAddress::AbstractUnix(name),
                                                     options.backlog, /*reuse_address=*/false));
  TANDEM_ASSIGN_OR_RETURN(UniqueFd wake, MakeWakeFd());
  return std::unique_ptr<SocketListener>(
      new SocketListener(std::move(fd), std::move(wake), /*is_unix=*/true, /*port=*/0, options));
}

void SocketListener::Shutdown() {
  const uint64_t one = 1;
  // The eventfd stays readable from now on (never read), so every later poll sees it.
  if (write(wake_.get(), &one, sizeof(one)) < 0) {
  }
}

StatusOr<UniqueFd> SocketListener::Accept(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  int r;
  do {
    r = poll(fds, 2, timeout.count() < 0 ? -1 : static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  if (fds[1].revents & POLLIN) return CancelledError("the listener was shut down");
  if (r < 0) return UnavailableError(std::string("poll: ") + std::strerror(errno));
  if (r == 0 || !(fds[0].revents & POLLIN)) return DeadlineExceededError("no connection");
  UniqueFd fd(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
      return ResourceExhaustedError(std::string("accept: ") + std::strerror(e));
    }
    // A connection reset before it was accepted (ECONNABORTED) or a signal: no
    // connection this time.
    if (e == ECONNABORTED || e == EINTR || e == EAGAIN)
      return DeadlineExceededError("no connection");
    return UnavailableError(std::string("accept: ") + std::strerror(e));
  }
  if (is_unix_) {
    if (options_.require_owner_peer) TANDEM_RETURN_IF_ERROR(CheckUnixPeerIsOwner(fd.get()));
  } else {
    if (options_.tcp_nodelay) {
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (options_.tcp_send_buffer_bytes > 0) {
      setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &options_.tcp_send_buffer_bytes, sizeof(int));
    }
  }
  return fd;
}

}  // namespace tandem::net
