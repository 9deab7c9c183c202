#include "net/framed_socket.h"

#include <vector>

namespace tandem::net {

Status SendFrame(Connection& conn, std::span<const uint8_t> header,
                 std::span<const std::string_view> parts, int pass_fd) {
  std::vector<const void*> data;
  std::vector<size_t> sizes;
  data.reserve(parts.size() + 1);
  sizes.reserve(parts.size() + 1);
  if (pass_fd >= 0) {
    if (header.empty())
      return InvalidArgumentError("a passed descriptor needs a frame header to travel with");
    TANDEM_RETURN_IF_ERROR(conn.SendWithFd(header.data(), header.size(), pass_fd));
  } else {
    data.push_back(header.data());
    sizes.push_back(header.size());
  }
  for (std::string_view p : parts) {
    data.push_back(p.data());
    sizes.push_back(p.size());
  }
  if (data.empty()) return Status::Ok();
  return conn.Send(data.data(), sizes.data(), static_cast<int>(data.size()));
}

Status SendFrame(Connection& conn, std::span<const uint8_t> header, std::string_view body,
                 int pass_fd) {
  return SendFrame(conn, header, std::span<const std::string_view>(&body, body.empty() ? 0 : 1),
                   pass_fd);
}

Status RecvFrame(Connection& conn, std::span<uint8_t> header, const FrameBodyLength& body_length,
                 uint32_t max_body_bytes, std::string* body, UniqueFd* passed_fd) {
  UniqueFd received;
  if (passed_fd != nullptr) {
    int fd = -1;
    TANDEM_RETURN_IF_ERROR(conn.RecvWithFd(header.data(), header.size(), &fd));
    received.Reset(fd);
  } else {
    // A plain receive: a descriptor sent anyway is dropped by the kernel (never installed).
    TANDEM_RETURN_IF_ERROR(conn.Recv(header.data(), header.size()));
  }
  TANDEM_ASSIGN_OR_RETURN(uint32_t length, body_length(header));
  if (length > max_body_bytes) {
    return InvalidArgumentError("frame body of " + std::to_string(length) +
                                " bytes exceeds the limit of " + std::to_string(max_body_bytes));
  }
  if (received.valid()) *passed_fd = std::move(received);
  body->resize(length);
  if (length == 0) return Status::Ok();
  return conn.Recv(body->data(), length);
}

}  // namespace tandem::net
