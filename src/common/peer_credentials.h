// Who is on the other end of a Unix-domain socket.
//
// The same-host paths (the KV transfer's memfd handover, the pool worker's client
// socket) listen on abstract Unix sockets. Those have no file permissions: any process
// in the same network namespace can connect. The listeners therefore check the peer's
// uid (SO_PEERCRED) before handing out a shared-memory descriptor, so that only the
// service's own user (or root) gets one. A process of the same user could read the
// memory through /proc/<pid>/mem anyway, so that is the real boundary.
//
// Thread safety: pure functions of a descriptor.
#pragma once

#include <sys/types.h>

#include "common/status.h"

namespace tandem {

// The effective uid of the process that connected `fd` (a connected AF_UNIX socket).
// Internal error when the kernel cannot tell (not a Unix socket).
StatusOr<uid_t> UnixPeerUid(int fd);

// OK when the peer of `fd` runs as this process's effective uid, or as root.
// PermissionDenied naming both uids otherwise.
Status CheckUnixPeerIsOwner(int fd);

}  // namespace tandem
