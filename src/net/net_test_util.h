// Test helpers for tandem_net: a blocking raw TCP client (to send bytes no well-behaved
// client would) and a file-descriptor limit bump for many-connection tests.
//
// Thread safety: a RawConnection is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::net::testing {

class RawConnection {
 public:
  // Connects to 127.0.0.1:port; check ok() afterwards.
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  RawConnection(RawConnection&& other) noexcept;
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Sends all of `bytes`; false on error.
  bool Send(std::string_view bytes);
  // Reads one HTTP response (head plus Content-Length body, or up to EOF when there is
  // no Content-Length); returns what was read, possibly partial on timeout/EOF.
  std::string ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads until `needle` appears in the data read so far (returned), EOF or timeout.
  std::string ReadUntil(std::string_view needle,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // True if the peer closes (EOF or reset) within `timeout`; discards data read.
  bool WaitClosed(std::chrono::milliseconds timeout);
  void Close();

 private:
  // Reads once into pending_ with a deadline; returns bytes read, 0 on EOF, -1 on
  // error or timeout.
  long ReadSome(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string pending_;  // bytes read but not yet returned
};

// Status code of a raw HTTP response ("HTTP/1.1 404 ..." -> 404), or 0.
int StatusOf(std::string_view response);
// The body of a raw HTTP response (after the blank line).
std::string BodyOf(std::string_view response);

// Raises the soft RLIMIT_NOFILE to at least `want` (bounded by the hard limit); returns
// the soft limit now in effect.
long RaiseFdLimit(long want);

}  // namespace tandem::net::testing
