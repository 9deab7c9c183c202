// File-descriptor passing over a connected Unix stream socket (SCM_RIGHTS): one
// descriptor travels with the first byte of a send. What the same-host paths hand out
// this way is shared memory (the KV arena's memfd); see common/peer_credentials.h for
// who may receive it.
//
// Both calls make one system call (retried on EINTR) and report how many bytes it moved;
// the caller sends or receives the rest of its buffer as plain bytes.
// Errors: DeadlineExceeded on the socket's I/O timeout, Unavailable otherwise (and on
// EOF for the receive).
// Thread safety: pure functions of the descriptors; one socket, one thread at a time.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "net/unique_fd.h"

namespace tandem::net {

// Sends up to `size` bytes of `data` (size >= 1), `pass_fd` attached (-1: none); the
// number of bytes sent (>= 1). The receiver gets its own copy of the descriptor.
StatusOr<size_t> SendWithFd(int socket_fd, const void* data, size_t size, int pass_fd);

// Receives up to `size` bytes (size >= 1); the number received (>= 1). A descriptor
// that came with them is stored in *received (close-on-exec), replacing what it held;
// when `received` is null it is closed.
StatusOr<size_t> RecvWithFd(int socket_fd, void* data, size_t size, UniqueFd* received);

}  // namespace tandem::net
