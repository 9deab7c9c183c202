// FaultyConnection: a test decorator of a Connection that breaks or corrupts the
// incoming stream after a number of bytes, or delays each receive — how the transfer
// and pool tests make a peer fail mid-stream without a real network fault.
//
// Thread safety: as the Connection it wraps (one thread at a time; Shutdown from any).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "net/socket_connection.h"

namespace tandem::net {

struct FaultPlan {
  bool fail_connect =
      false;  // for connectors that honour it (e.g. transfer::FaultInjectingTransport)
  int64_t fail_after_recv_bytes = -1;  // >= 0: Recv fails once this many bytes came in
  int64_t corrupt_recv_byte_at = -1;   // >= 0: flips the bits of that received byte
  std::chrono::milliseconds recv_delay{0};
};

class FaultyConnection final : public Connection {
 public:
  FaultyConnection(std::unique_ptr<Connection> inner, FaultPlan plan)
      : inner_(std::move(inner)), plan_(plan) {}
  using Connection::Send;
  Status Send(const void* const* data, const size_t* sizes, int count) override;
  Status Recv(void* data, size_t size) override;
  Status SendWithFd(const void* data, size_t size, int fd) override;
  // Counts toward fail_after_recv_bytes; neither corrupted nor delayed.
  Status RecvWithFd(void* data, size_t size, int* fd) override;
  void Shutdown() override;

 private:
  std::unique_ptr<Connection> inner_;
  const FaultPlan plan_;
  int64_t received_ = 0;  // bytes received so far
};

}  // namespace tandem::net
