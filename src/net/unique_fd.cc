#include "net/unique_fd.h"

#include <unistd.h>

namespace tandem::net {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

}  // namespace tandem::net
