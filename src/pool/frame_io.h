// How the pool's frames (pool/wire.h, docs/POOL.md "Wire format") travel: over the
// framed-socket layer (net/), with the worker's socket naming convention.
//
// Every read and write is bounded by the connection's I/O timeout: a stalled peer gives
// DeadlineExceeded, a closed one Unavailable, a malformed frame InvalidArgument.
// Thread safety: functions; one connection, one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/socket_address.h"
#include "net/socket_connection.h"
#include "net/unique_fd.h"
#include "pool/wire.h"

namespace tandem::pool {

using net::HostPort;
using net::ParseHostPort;  // "IP:PORT", IPv4: the form of every worker address
using net::UniqueFd;

// The abstract Unix socket name of the worker at `worker_address` (docs/POOL.md).
std::string UnixSocketName(const std::string& worker_address);

// Sends header (its body_len is set from body) and body in one write; when pass_fd >= 0
// it travels as SCM_RIGHTS with the first byte. InvalidArgument for a body over
// kMaxBodyBytes.
Status SendFrame(net::Connection& conn, FrameHeader header, std::string_view body,
                 int pass_fd = -1);
// Sends header and a body made of `parts` (a gather write, no concatenation: e.g.
// objects straight from the arena). At most 1024 parts.
Status SendFrameParts(net::Connection& conn, FrameHeader header,
                      const std::vector<std::string_view>& parts);
// Receives one frame. When received_fd is given, a passed descriptor is stored there.
// Unavailable on EOF, InvalidArgument on a bad header or a body over `max_body` bytes
// (checked before anything is allocated).
Status RecvFrame(net::Connection& conn, FrameHeader* header, std::string* body,
                 UniqueFd* received_fd = nullptr, uint32_t max_body = kMaxBodyBytes);

}  // namespace tandem::pool
