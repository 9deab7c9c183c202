// The Status of a failed socket system call, from its errno: the error model of the
// framed-socket layer (framed_socket.h, fd_passing.h, socket_connection.h).
//
// EAGAIN / EWOULDBLOCK / ETIMEDOUT are what a blocking socket reports when its
// SO_RCVTIMEO / SO_SNDTIMEO (or a TCP timeout) runs out, so they map to DeadlineExceeded;
// everything else to Unavailable (the peer or the network: retry the call).
// Thread safety: a pure function.
#pragma once

#include <string>

#include "common/status.h"

namespace tandem::net {

// "`what`: strerror(err)", with " (timed out)" appended for the timeout codes.
Status SocketErrorStatus(const std::string& what, int err);

}  // namespace tandem::net
