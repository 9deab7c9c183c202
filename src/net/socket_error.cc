#include "net/socket_error.h"

#include <cerrno>
#include <cstring>

namespace tandem::net {

Status SocketErrorStatus(const std::string& what, int err) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT)
    return DeadlineExceededError(msg + " (timed out)");
  return UnavailableError(msg);
}

}  // namespace tandem::net
