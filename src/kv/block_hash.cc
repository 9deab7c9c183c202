#include "kv/block_hash.h"

#include <xxhash.h>

#include <utility>

#include "common/little_endian.h"
#include "common/logging.h"

namespace tandem::kv {
namespace {

// Bumping the tag is how a future scheme change keeps old and new keys apart.
constexpr std::string_view kSchemeTag = "tandem.kv.block_hash.v1";

// Integers go in little-endian, byte by byte, so the result does not depend on host
// endianness.
void PutU32(std::string* out, uint32_t v) { little_endian::Append<uint32_t>(out, v); }

void PutString(std::string* out, std::string_view s) {
  TANDEM_CHECK(s.size() <= UINT32_MAX) << "field too long to hash: " << s.size();
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

BlockHash Digest(const std::string& bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return BlockHash{h.high64, h.low64};
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::array<uint8_t, 16> BlockHash::Bytes() const {
  std::array<uint8_t, 16> out{};
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    out[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
  return out;
}

std::string BlockHash::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(32);
  for (uint8_t b : Bytes()) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

StatusOr<BlockHash> BlockHash::FromHex(std::string_view hex) {
  if (hex.size() != 32) {
    return InvalidArgumentError("block hash hex must have 32 digits, got " +
                                std::to_string(hex.size()));
  }
  BlockHash h;
  for (size_t i = 0; i < 32; ++i) {
    int v = HexValue(hex[i]);
    if (v < 0) return InvalidArgumentError("bad hex digit in block hash: " + std::string(hex));
    uint64_t& word = i < 16 ? h.high : h.low;
    word = (word << 4) | static_cast<uint64_t>(v);
  }
  return h;
}

BlockHash ComputeRootHash(std::string_view model_fingerprint, int32_t block_size_tokens,
                          std::string_view kv_dtype) {
  TANDEM_CHECK(block_size_tokens > 0) << "block_size_tokens=" << block_size_tokens;
  std::string bytes;
  bytes.append(kSchemeTag);
  PutString(&bytes, model_fingerprint);
  PutU32(&bytes, static_cast<uint32_t>(block_size_tokens));
  PutString(&bytes, kv_dtype);
  return Digest(bytes);
}

BlockHash ComputeBlockHash(const BlockHash& parent, std::span<const int32_t> block_token_ids,
                           std::string_view extra) {
  std::string bytes;
  bytes.reserve(16 + 4 + 4 * block_token_ids.size() + 4 + extra.size());
  for (uint8_t b : parent.Bytes()) bytes.push_back(static_cast<char>(b));
  PutU32(&bytes, static_cast<uint32_t>(block_token_ids.size()));
  for (int32_t token : block_token_ids) PutU32(&bytes, static_cast<uint32_t>(token));
  PutString(&bytes, extra);
  return Digest(bytes);
}

std::vector<BlockHash> HashFullBlocks(const BlockHash& root, std::span<const int32_t> token_ids,
                                      int32_t block_size_tokens, std::string_view extra) {
  BlockHasher hasher(root, block_size_tokens, std::string(extra));
  hasher.Update(token_ids);
  return hasher.hashes();
}

BlockHasher::BlockHasher(const BlockHash& root, int32_t block_size_tokens, std::string extra)
    : root_(root), block_size_tokens_(block_size_tokens), extra_(std::move(extra)) {
  TANDEM_CHECK(block_size_tokens_ > 0) << "block_size_tokens=" << block_size_tokens_;
}

size_t BlockHasher::Update(std::span<const int32_t> token_ids) {
  const size_t block = static_cast<size_t>(block_size_tokens_);
  const size_t num_full = token_ids.size() / block;
  // A shrinking sequence would leave stale hashes behind; that is a caller bug.
  TANDEM_CHECK(num_full >= hashes_.size()) << "sequence shrank: " << token_ids.size() << " tokens, "
                                           << hashes_.size() << " blocks already hashed";
  const size_t before = hashes_.size();
  hashes_.reserve(num_full);
  for (size_t i = before; i < num_full; ++i) {
    const BlockHash& parent = i == 0 ? root_ : hashes_[i - 1];
    hashes_.push_back(ComputeBlockHash(parent, token_ids.subspan(i * block, block), extra_));
  }
  return num_full - before;
}

}  // namespace tandem::kv
