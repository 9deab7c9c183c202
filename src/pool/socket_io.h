// Blocking socket helpers for the pool's framed protocol: connect with a timeout, send
// and receive whole frames (optionally passing a file descriptor over a Unix socket),
// and the worker's address conventions.
//
// Every read and write is bounded by the socket's I/O timeout (SetIoTimeout): a stalled
// peer gives DeadlineExceeded, a closed one Unavailable, a malformed frame
// InvalidArgument. Never blocks forever when a timeout is set.
//
// Thread safety: functions are thread-safe; one fd must be used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "pool/wire.h"

namespace tandem::pool {

// Owns a file descriptor (closes it on destruction).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};
// "IP:PORT" -> HostPort; InvalidArgument otherwise. The host must be an IPv4 literal.
StatusOr<HostPort> ParseHostPort(std::string_view text);

// The abstract Unix socket name of the worker at `worker_address` (docs/POOL.md).
std::string UnixSocketName(const std::string& worker_address);

StatusOr<UniqueFd> ConnectTcp(const HostPort& address, std::chrono::milliseconds timeout);
StatusOr<UniqueFd> ConnectUnix(const std::string& abstract_name, std::chrono::milliseconds timeout);
StatusOr<UniqueFd> ListenTcp(const HostPort& address, int backlog);
StatusOr<UniqueFd> ListenUnix(const std::string& abstract_name, int backlog);

Status SetIoTimeout(int fd, std::chrono::milliseconds timeout);

// Sends header (its body_len is set from body) and body in one sendmsg sequence; when
// pass_fd >= 0 it travels as SCM_RIGHTS with the first byte.
Status SendFrame(int fd, FrameHeader header, std::string_view body, int pass_fd = -1);
// Sends header and a body made of `parts` (written with writev, no concatenation:
// e.g. objects straight from the arena). At most 1024 parts.
Status SendFrameParts(int fd, FrameHeader header, const std::vector<std::string_view>& parts);
// Receives one frame. When received_fd is given, a passed descriptor is stored there
// (else closed). Unavailable on EOF, InvalidArgument on a bad header or a body over
// `max_body` bytes (checked before anything is allocated).
Status RecvFrame(int fd, FrameHeader* header, std::string* body, UniqueFd* received_fd = nullptr,
                 uint32_t max_body = kMaxBodyBytes);

}  // namespace tandem::pool
