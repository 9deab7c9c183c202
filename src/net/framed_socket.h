// Length-checked frames over a Connection: a fixed-size header that states the body's
// length, then the body. The protocols on top (the KV transfer's 16-byte header, the
// pool's 24-byte one; docs/KV_TRANSFER.md, docs/POOL.md) encode and validate their own
// headers; this layer sends header and body in one gather write, checks the stated
// length against a limit before anything is allocated, and carries a passed descriptor.
//
// Thread safety: functions; one Connection, one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/socket_connection.h"
#include "net/unique_fd.h"

namespace tandem::net {

// Sends `header` then the body `parts` (no concatenation: e.g. objects straight from
// an arena). With pass_fd >= 0 the descriptor travels with the header's first byte
// (Unix sockets only; header must not be empty).
Status SendFrame(Connection& conn, std::span<const uint8_t> header,
                 std::span<const std::string_view> parts, int pass_fd = -1);
Status SendFrame(Connection& conn, std::span<const uint8_t> header, std::string_view body,
                 int pass_fd = -1);

// Validates a received header and returns the length of the body it announces.
using FrameBodyLength = std::function<StatusOr<uint32_t>(std::span<const uint8_t> header)>;

// Receives one frame into `header` (its whole size) and `body`. The header's verdict
// (`body_length`'s error) is returned as it is; a body over `max_body_bytes` is
// InvalidArgument, before it is read. When `passed_fd` is given, a descriptor that came
// with the header is stored there; otherwise the header is read as plain bytes (the
// kernel drops a descriptor sent anyway).
Status RecvFrame(Connection& conn, std::span<uint8_t> header, const FrameBodyLength& body_length,
                 uint32_t max_body_bytes, std::string* body, UniqueFd* passed_fd = nullptr);

// A byte view of a received body, for decoders that take bytes.
inline std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace tandem::net
