#include "pool/frame_io.h"

#include "net/framed_socket.h"

namespace tandem::pool {

std::string UnixSocketName(const std::string& worker_address) {
  return "tandem-pool/" + worker_address;
}

Status SendFrame(net::Connection& conn, FrameHeader header, std::string_view body, int pass_fd) {
  if (body.size() > kMaxBodyBytes) return InvalidArgumentError("frame body too large");
  header.body_len = static_cast<uint32_t>(body.size());
  uint8_t head[kHeaderBytes];
  EncodeHeader(header, head);
  return net::SendFrame(conn, head, body, pass_fd);
}

Status SendFrameParts(net::Connection& conn, FrameHeader header,
                      const std::vector<std::string_view>& parts) {
  if (parts.size() > 1024) return InvalidArgumentError("too many frame parts");
  uint64_t total = 0;
  for (std::string_view p : parts) total += p.size();
  if (total > kMaxBodyBytes) return InvalidArgumentError("frame body too large");
  header.body_len = static_cast<uint32_t>(total);
  uint8_t head[kHeaderBytes];
  EncodeHeader(header, head);
  return net::SendFrame(conn, head, parts);
}

Status RecvFrame(net::Connection& conn, FrameHeader* header, std::string* body,
                 UniqueFd* received_fd, uint32_t max_body) {
  uint8_t head[kHeaderBytes];
  auto body_length = [header](std::span<const uint8_t> bytes) -> StatusOr<uint32_t> {
    TANDEM_RETURN_IF_ERROR(DecodeHeader(bytes.data(), header));
    return header->body_len;
  };
  return net::RecvFrame(conn, head, body_length, max_body, body, received_fd);
}

}  // namespace tandem::pool
