// SocketListener: a listening TCP or abstract Unix socket and its accept loop's one call,
// Accept(), which a Shutdown() from another thread ends.
//
// The same-host Unix sockets hand out shared memory, and abstract sockets have no file
// permissions; a listener made with `require_owner_peer` therefore refuses (closes) a
// peer running as another user than this process, root excepted
// (common/peer_credentials.h), before the caller sees it.
//
// Thread safety: Accept from one thread at a time; Shutdown from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/unique_fd.h"

namespace tandem::net {

struct SocketListenerOptions {
  int backlog = 128;
  bool require_owner_peer = false;  // Unix only: see above
  // Applied to each accepted TCP connection.
  bool tcp_nodelay = false;
  int tcp_send_buffer_bytes = 0;  // > 0: SO_SNDBUF
};

class SocketListener {
 public:
  // TCP on an IPv4 or IPv6 literal; port 0 picks a free port (see port()). SO_REUSEADDR.
  // Unavailable when the address cannot be bound (in use), InvalidArgument when it is
  // not an IP literal.
  static StatusOr<std::unique_ptr<SocketListener>> ListenTcp(
      const std::string& host, uint16_t port, const SocketListenerOptions& options = {});
  // The abstract Unix socket `name` (without the leading NUL).
  static StatusOr<std::unique_ptr<SocketListener>> ListenUnix(
      const std::string& name, const SocketListenerOptions& options = {});
  ~SocketListener();
  SocketListener(const SocketListener&) = delete;
  SocketListener& operator=(const SocketListener&) = delete;

  // The next connection (blocking, close-on-exec). `timeout` < 0 waits until one comes.
  //   DeadlineExceeded   no connection within `timeout`
  //   Cancelled          Shutdown() was called (now or before)
  //   ResourceExhausted  out of descriptors: back off, then call again
  //   PermissionDenied   a refused peer (require_owner_peer); it was closed
  //   Unavailable        another accept error
  StatusOr<UniqueFd> Accept(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  // Ends the Accept in progress and every later one. Idempotent.
  void Shutdown();

  uint16_t port() const { return port_; }  // TCP: the bound port; Unix: 0
  bool is_unix() const { return is_unix_; }

 private:
  SocketListener(UniqueFd fd, UniqueFd wake, bool is_unix, uint16_t port,
                 const SocketListenerOptions& options);

  const UniqueFd fd_;
  const UniqueFd wake_;  // eventfd: readable once Shutdown() was called
  const bool is_unix_;
  const uint16_t port_;
  const SocketListenerOptions options_;
};

}  // namespace tandem::net
