#include "transfer/transport.h"

#include "net/framed_socket.h"

namespace tandem::transfer {

std::string UnixSocketName(int port) { return "tandem-kv-" + std::to_string(port); }

StatusOr<std::unique_ptr<Connection>> SocketTransport::Connect(const Endpoint& endpoint) {
  if (endpoint.port <= 0 || endpoint.port > 65535) {
    return InvalidArgumentError("kv transfer: bad port " + std::to_string(endpoint.port));
  }
  StatusOr<std::unique_ptr<net::SocketConnection>> conn =
      endpoint.unix_socket
          ? net::ConnectUnix(UnixSocketName(endpoint.port), options_.connect_timeout)
          : net::ConnectTcp(endpoint.host, static_cast<uint16_t>(endpoint.port),
                            {.timeout = options_.connect_timeout,
                             .tcp_nodelay = true,
                             .receive_buffer_bytes = 4 << 20});
  if (!conn.ok()) return conn.status().WithContext("kv transfer");
  TANDEM_RETURN_IF_ERROR((*conn)->SetIoTimeout(options_.io_timeout));
  return std::unique_ptr<Connection>(std::move(conn).value());
}

Status SendControlFrame(Connection& conn, FrameType type, std::string_view payload) {
  uint8_t header[kHeaderBytes];
  EncodeHeader(type, static_cast<uint32_t>(payload.size()), header);
  return net::SendFrame(conn, header, payload);
}

Status RecvControlFrame(Connection& conn, FrameHeader* header, std::string* payload) {
  uint8_t raw[kHeaderBytes];
  auto body_length = [header](std::span<const uint8_t> bytes) -> StatusOr<uint32_t> {
    TANDEM_ASSIGN_OR_RETURN(*header, DecodeHeader(bytes.data()));
    if (header->type == FrameType::kBlocks)
      return DataLossError("kv transfer: unexpected BLOCKS frame");
    return header->payload_bytes;
  };
  // DecodeHeader holds each type to its own bound; this one only backs it up.
  return net::RecvFrame(conn, raw, body_length, kMaxDataPayload, payload);
}

StatusOr<std::unique_ptr<Connection>> FaultInjectingTransport::Connect(const Endpoint& endpoint) {
  connects_.fetch_add(1);
  if (plan_.fail_connect) return UnavailableError("kv transfer: injected connect failure");
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, inner_->Connect(endpoint));
  return std::unique_ptr<Connection>(std::make_unique<net::FaultyConnection>(std::move(c), plan_));
}

}  // namespace tandem::transfer
