#include "net/faulty_connection.h"

#include <unistd.h>

namespace tandem::net {

Status FaultyConnection::Send(const void* const* data, const size_t* sizes, int count) {
  return inner_->Send(data, sizes, count);
}

Status FaultyConnection::Recv(void* data, size_t size) {
  if (plan_.recv_delay.count() > 0)
    usleep(static_cast<useconds_t>(plan_.recv_delay.count() * 1000));
  if (plan_.fail_after_recv_bytes >= 0 &&
      received_ + static_cast<int64_t>(size) > plan_.fail_after_recv_bytes) {
    inner_->Shutdown();
    return UnavailableError("injected connection failure");
  }
  TANDEM_RETURN_IF_ERROR(inner_->Recv(data, size));
  const int64_t at = plan_.corrupt_recv_byte_at;
  if (at >= received_ && at < received_ + static_cast<int64_t>(size))
    static_cast<uint8_t*>(data)[at - received_] ^= 0xFF;
  received_ += static_cast<int64_t>(size);
  return Status::Ok();
}

Status FaultyConnection::SendWithFd(const void* data, size_t size, int fd) {
  return inner_->SendWithFd(data, size, fd);
}

Status FaultyConnection::RecvWithFd(void* data, size_t size, int* fd) {
  if (plan_.fail_after_recv_bytes >= 0 &&
      received_ + static_cast<int64_t>(size) > plan_.fail_after_recv_bytes) {
    inner_->Shutdown();
    return UnavailableError("injected connection failure");
  }
  TANDEM_RETURN_IF_ERROR(inner_->RecvWithFd(data, size, fd));
  received_ += static_cast<int64_t>(size);
  return Status::Ok();
}

void FaultyConnection::Shutdown() { inner_->Shutdown(); }

}  // namespace tandem::net
