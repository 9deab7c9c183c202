// The KV-transfer wire format (docs/KV_TRANSFER.md): 16-byte frame headers and the
// payload encoders/decoders. Every decoder checks every length against the bytes that
// remain and returns a Status naming what was wrong; nothing is trusted.
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::transfer {

inline constexpr uint32_t kFrameMagic = 0x564B4454;  // "TDKV" little-endian
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kHeaderBytes = 16;
inline constexpr uint32_t kMaxControlPayload = 64 * 1024;
inline constexpr uint32_t kMaxDataPayload = 64 * 1024 * 1024;
inline constexpr uint32_t kMaxBlocksPerFrame = 16;

enum class FrameType : uint16_t {
  kPull = 1,
  kBlocks = 2,
  kPullEnd = 3,
  kDone = 4,
  kAck = 5,
  kError = 6,
  kShmPull = 7,
  kShmMap = 8,
  kHello = 9,
};

struct FrameHeader {
  FrameType type = FrameType::kError;
  uint32_t payload_bytes = 0;
};

void EncodeHeader(FrameType type, uint32_t payload_bytes, uint8_t out[kHeaderBytes]);
// Checks magic, version, type and the length bound of the type.
StatusOr<FrameHeader> DecodeHeader(const uint8_t in[kHeaderBytes]);

// PULL / SHM_PULL.
struct PullRequest {
  std::string request_id;
  std::string model_fingerprint;
  uint64_t k_block_bytes = 0;
  uint64_t v_block_bytes = 0;
  std::vector<int32_t> block_ids;
};
std::string EncodePull(const PullRequest& pull);
StatusOr<PullRequest> DecodePull(std::span<const uint8_t> payload);

// BLOCKS: the fixed part before the block bytes.
inline constexpr size_t kBlocksPrefixBytes = 8;
void EncodeBlocksPrefix(uint32_t first, uint32_t count, uint8_t out[kBlocksPrefixBytes]);
// Validates first/count against the pull (n blocks) and the payload size.
Status DecodeBlocksPrefix(const uint8_t in[kBlocksPrefixBytes], uint32_t payload_bytes, uint32_t n_blocks,
                          uint64_t block_bytes, uint32_t* first, uint32_t* count);

// HELLO carries the shared auth token; DONE the request id: both are one string.
std::string EncodeDone(std::string_view request_id);
StatusOr<std::string> DecodeDone(std::span<const uint8_t> payload);

std::string EncodeError(const Status& status);
Status DecodeError(std::span<const uint8_t> payload);  // the carried error (never OK)

struct ShmMap {
  uint64_t map_size = 0;
  uint64_t keys_offset = 0;
  uint64_t values_offset = 0;
  uint64_t arena_id = 0;
};
std::string EncodeShmMap(const ShmMap& map);
StatusOr<ShmMap> DecodeShmMap(std::span<const uint8_t> payload);

}  // namespace tandem::transfer
