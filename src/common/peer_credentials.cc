#include "common/peer_credentials.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tandem {

StatusOr<uid_t> UnixPeerUid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
    return InternalError(std::string("SO_PEERCRED: ") + std::strerror(errno));
  }
  return cred.uid;
}

Status CheckUnixPeerIsOwner(int fd) {
  StatusOr<uid_t> peer = UnixPeerUid(fd);
  if (!peer.ok()) return peer.status();
  const uid_t self = geteuid();
  if (*peer == self || *peer == 0) return Status::Ok();
  return PermissionDeniedError("unix peer runs as uid " + std::to_string(*peer) + "; only uid " +
                               std::to_string(self) + " or root may connect");
}

}  // namespace tandem
