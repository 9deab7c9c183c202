// libFuzzer target: the KV-transfer wire format from both ends. The input is what the
// peer sends: byte 0 picks the side (server serving a consumer, or client pulling from
// a producer), byte 1 holds flags (auth token, unix socket, shm), the rest is the stream. Neither side may crash, hang or over-read.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "transfer/lease_table.h"
#include "transfer/transfer_client.h"
#include "transfer/transfer_server.h"
#include "transfer/wire.h"

namespace tandem::transfer {
namespace {

constexpr uint64_t kK = 64;
constexpr uint64_t kV = 32;
constexpr int64_t kBlocks = 8;

// A Connection whose incoming bytes are the fuzz input; what is sent is dropped.
class BufferConnection final : public Connection {
 public:
  BufferConnection(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  using Connection::Send;
  Status Send(const void* const*, const size_t*, int) override { return Status::Ok(); }
  Status Recv(void* out, size_t n) override {
    if (size_ - pos_ < n) return UnavailableError("end of input");
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Status SendWithFd(const void*, size_t, int) override { return Status::Ok(); }
  Status RecvWithFd(void* out, size_t n, int* fd) override {
    *fd = -1;
    return Recv(out, n);
  }
  void Shutdown() override {}

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

class BufferTransport final : public Transport {
 public:
  BufferTransport(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  StatusOr<std::unique_ptr<Connection>> Connect(const Endpoint&) override {
    return std::unique_ptr<Connection>(std::make_unique<BufferConnection>(data_, size_));
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

struct Arena {
  std::vector<uint8_t> keys = std::vector<uint8_t>(kK * kBlocks);
  std::vector<uint8_t> values = std::vector<uint8_t>(kV * kBlocks);
  KvMemory memory() {
    KvMemory m;
    m.keys = keys.data();
    m.values = values.data();
    m.k_block_bytes = kK;
    m.v_block_bytes = kV;
    m.num_blocks = kBlocks;
    return m;
  }
};

}  // namespace
}  // namespace tandem::transfer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::transfer;
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 3;
  const uint8_t flags = data[1];
  data += 2;
  size -= 2;
  Arena arena;
  if (mode == 0) {
    LeaseTable leases(std::chrono::seconds(30), std::chrono::seconds(60), nullptr);
    (void)leases.Keep("r", {0, 1, 2, 3});
    TransferServerOptions options;
    options.auth_token = (flags & 1) ? "token" : "";
    TransferServer server(options, arena.memory(), &leases, "fp");
    BufferConnection conn(data, size);
    server.Serve(conn, (flags & 2) != 0);
    leases.TakeFreeable();
  } else if (mode == 1) {
    BufferTransport transport(data, size);
    TransferClient client(&transport, arena.memory(), "fp", /*enable_shm=*/(flags & 1) != 0);
    (void)client.Pull({"127.0.0.1", 1, "r", {0, 1, 2}, {3, 4, 5}});
  } else {
    std::span<const uint8_t> bytes(data, size);
    if (size >= kHeaderBytes) (void)DecodeHeader(data);
    (void)DecodePull(bytes);
    (void)DecodeDone(bytes);
    (void)DecodeError(bytes);
    (void)DecodeShmMap(bytes);
    if (size >= kBlocksPrefixBytes) {
      uint32_t first = 0;
      uint32_t count = 0;
      (void)DecodeBlocksPrefix(data, static_cast<uint32_t>(size), 4, kK + kV, &first, &count);
    }
  }
  return 0;
}
