// The pool's wire format (docs/POOL.md "Wire format"): a 24-byte versioned frame header
// and length-checked body encoders/decoders. Shared by the worker, the peer client and
// the client library.
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::pool {

constexpr uint32_t kFrameMagic = 0x4C505454;  // "TTPL" little-endian
constexpr uint16_t kWireVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr uint64_t kMaxObjectBytes = 1ull << 30;
constexpr uint32_t kMaxBodyBytes = (1u << 30) + (64u << 10);
constexpr uint32_t kMaxRequestBytes = 16u << 20;  // any request a worker accepts
constexpr uint32_t kMaxKeysPerFrame = 4096;
constexpr size_t kMaxKeyBytes = 1024;
constexpr uint32_t kMaxFetchKeys = 64;

enum class MsgType : uint16_t {
  kHello = 1,
  kExist = 2,
  kPutAlloc = 3,
  kPutSeal = 4,
  kGet = 5,
  kRelease = 6,
  kSoftPin = 7,
  kFetch = 16,
  kDirPut = 17,
  kDirDel = 18,
  kDirLookup = 19,
};
bool IsKnownType(uint16_t type);
bool IsPeerType(MsgType type);  // FETCH and DIR_*: TCP (worker) connections only

enum class Role : uint8_t { kClient = 0, kPeer = 1 };

// EXIST answers.
enum class ExistCode : uint8_t { kAbsent = 0, kLocal = 1, kRemote = 2 };
// PUT_ALLOC answers.
enum class AllocCode : uint8_t { kAllocated = 0, kExists = 1, kNoSpace = 2, kInvalid = 3 };
// GET answers.
// kDiskHit: read from this worker's disk tier back into the arena (docs/POOL.md).
enum class GetCode : uint8_t { kLocalHit = 0, kRemoteHit = 1, kMiss = 2, kDiskHit = 3 };

struct FrameHeader {
  MsgType type = MsgType::kHello;
  uint16_t status = 0;  // StatusCode in responses
  uint32_t body_len = 0;
  uint64_t request_id = 0;
};

void EncodeHeader(const FrameHeader& header, uint8_t out[kHeaderBytes]);
// Checks magic, version, type and body_len; InvalidArgument names what is wrong.
Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* header);

// Appends little-endian fields to a body.
class BodyWriter {
 public:
  void U8(uint8_t v) { data_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  void String(std::string_view s);
  void Keys(const std::vector<std::string>& keys);
  std::string& data() { return data_; }

 private:
  std::string data_;
};

// Reads fields with bounds checks; every method returns InvalidArgument on a short body.
// Borrows the body, which must outlive the reader.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : body_(body) {}
  Status U8(uint8_t* v);
  Status U32(uint32_t* v);
  Status U64(uint64_t* v);
  Status String(std::string* s, size_t max_len);
  // A view into the body (no copy).
  Status StringView(std::string_view* s, size_t max_len);
  // `u32 n` (n <= max_n) then n keys of 1..kMaxKeyBytes bytes.
  Status Keys(std::vector<std::string>* keys, uint32_t max_n = kMaxKeysPerFrame);
  // A key count, checked against max_n.
  Status Count(uint32_t* n, uint32_t max_n = kMaxKeysPerFrame);
  Status Key(std::string* key);
  // InvalidArgument when bytes are left over.
  Status Finish() const;

 private:
  std::string_view body_;
  size_t pos_ = 0;
};

// A non-OK response body is the status message; these convert both ways.
Status StatusFromResponse(const FrameHeader& header, std::string_view body);
uint16_t WireStatus(const Status& status);

}  // namespace tandem::pool
