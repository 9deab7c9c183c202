// Connection: a blocking byte stream with per-operation timeouts, able to pass a file
// descriptor — the interface the framed protocols (the KV transfer, the pool) run on,
// so a test can put a fault-injecting decorator (faulty_connection.h) or an in-memory
// stream in its place. SocketConnection is the real one, over TCP or a Unix socket;
// ConnectTcp / ConnectUnix open one with a connect timeout.
//
// Errors: DeadlineExceeded when an I/O or connect timeout passes, Unavailable when the
// peer closed or reset the connection (or none listens), InvalidArgument for a bad
// address.
// Thread safety: one Connection is used by one thread at a time, except Shutdown(),
// which may be called from any thread to unblock it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/unique_fd.h"

namespace tandem::net {

class Connection {
 public:
  virtual ~Connection() = default;
  // Sends all bytes of the `count` buffers, in order (one system call where possible).
  virtual Status Send(const void* const* data, const size_t* sizes, int count) = 0;
  Status Send(const void* data, size_t size) { return Send(&data, &size, 1); }
  // Receives exactly `size` bytes.
  virtual Status Recv(void* data, size_t size) = 0;
  // Unix sockets only: sends `data` with `fd` attached (it travels with the first byte)
  // / receives exactly `size` bytes and the descriptor that came with them (*fd = -1 if
  // none; the caller owns it).
  virtual Status SendWithFd(const void* data, size_t size, int fd) = 0;
  virtual Status RecvWithFd(void* data, size_t size, int* fd) = 0;
  // Unblocks any call in progress; later calls fail.
  virtual void Shutdown() = 0;
};

// A Connection over a connected stream socket, which it owns.
class SocketConnection final : public Connection {
 public:
  explicit SocketConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  using Connection::Send;
  Status Send(const void* const* data, const size_t* sizes, int count) override;
  Status Recv(void* data, size_t size) override;
  Status SendWithFd(const void* data, size_t size, int fd) override;
  Status RecvWithFd(void* data, size_t size, int* fd) override;
  void Shutdown() override;

  // Bounds every later send and receive (0 = no bound).
  Status SetIoTimeout(std::chrono::milliseconds timeout);
  Status SetSendTimeout(std::chrono::milliseconds timeout);
  // Says "no more data" to the peer (half close); receiving still works.
  void ShutdownWrite();
  // After an error answer: half-closes and discards what the peer still sends (up to
  // 256 KiB, 200 ms), so that closing does not reset the connection before the peer has
  // read the answer.
  void DrainBeforeClose();
  // The socket, for options this class does not cover. Still owned by this object.
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

struct ConnectOptions {
  std::chrono::milliseconds timeout{3000};  // the connect itself
  bool tcp_nodelay = true;
  int receive_buffer_bytes = 0;  // > 0: SO_RCVBUF (set before connecting)
};

// TCP to an IPv4 or IPv6 literal ("localhost" = 127.0.0.1). The connection has no I/O
// timeout until one is set.
StatusOr<std::unique_ptr<SocketConnection>> ConnectTcp(const std::string& host, uint16_t port,
                                                       const ConnectOptions& options = {});
// The abstract Unix socket `name` (without the leading NUL; net/socket_address.h).
StatusOr<std::unique_ptr<SocketConnection>> ConnectUnix(const std::string& name,
                                                        std::chrono::milliseconds timeout);

}  // namespace tandem::net
