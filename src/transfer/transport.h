// Transport: how the KV transfer reaches a producer — TCP, or the same-host abstract
// Unix socket "@tandem-kv-<port>" that can also pass the arena's memfd — behind one
// interface, plus a fault-injecting decorator for tests. The byte streams themselves
// are the framed-socket layer's (net/socket_connection.h).
//
// Connections are blocking with per-operation timeouts (the transfer runs on its own
// threads); every call returns a Status, DeadlineExceeded on a timeout.
// Thread safety: one Connection is used by one thread at a time, except Shutdown(),
// which may be called from any thread to unblock it. Transports are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/faulty_connection.h"
#include "net/socket_connection.h"
#include "transfer/wire.h"

namespace tandem::transfer {

using net::Connection;
using net::FaultPlan;

struct Endpoint {
  std::string host;  // TCP: an IP address; Unix: ignored
  int port = 0;
  bool unix_socket = false;  // the abstract socket "@tandem-kv-<port>"
};

// The abstract Unix socket name of the transfer server on `port`, without the leading
// NUL ("tandem-kv-8100").
std::string UnixSocketName(int port);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) = 0;
};

struct SocketOptions {
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::milliseconds io_timeout{10000};
};

// Real sockets: TCP (TCP_NODELAY, large buffers) and abstract Unix sockets.
class SocketTransport final : public Transport {
 public:
  explicit SocketTransport(SocketOptions options = {}) : options_(options) {}
  StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) override;

 private:
  SocketOptions options_;
};

// One control frame (docs/KV_TRANSFER.md) over the framed-socket layer: the header and
// the payload in one write / a frame whose header checks out (DecodeHeader: magic,
// version, type, length bound). A BLOCKS frame is DataLoss here: it is only expected
// inside a pull, whose reader takes it apart itself.
Status SendControlFrame(Connection& conn, FrameType type, std::string_view payload);
Status RecvControlFrame(Connection& conn, FrameHeader* header, std::string* payload);

// Test decorator: fails connects (plan.fail_connect), or wraps each connection in a
// net::FaultyConnection that breaks / corrupts the stream after a number of received
// bytes, or delays each receive.
class FaultInjectingTransport final : public Transport {
 public:
  FaultInjectingTransport(Transport* inner, FaultPlan plan) : inner_(inner), plan_(plan) {}
  StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint& endpoint) override;
  int connects() const { return connects_.load(); }

 private:
  Transport* inner_;
  FaultPlan plan_;
  std::atomic<int> connects_{0};
};

}  // namespace tandem::transfer
