// The typed bodies of every pool frame (docs/POOL.md "Wire format", the table of types):
// one encoder and one length-checked decoder per request and per response, so the worker
// (worker_session.cc), the client library (pool_client.cc) and the peer client
// (peer_client.cc) read and write each body the same way, and fuzz/pool_wire_fuzz.cc can
// check every decoder on arbitrary bytes.
//
// Decoders return InvalidArgument for a truncated body, trailing bytes, a count over its
// limit or an empty/overlong key, and leave `*out` unspecified then. Response bodies carry
// no count (the request fixed it), so their decoders take the expected count `n`.
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "pool/wire.h"

namespace tandem::pool {

// HELLO request. `role` is kept as sent: the worker checks the token before the role.
struct HelloRequest {
  std::string auth_token;  // at most kMaxTokenBytes
  uint8_t role = 0;        // Role: 0 client, 1 peer; other values are refused by the worker
};
inline constexpr size_t kMaxTokenBytes = 4096;
std::string EncodeHelloRequest(const HelloRequest& request);
Status DecodeHelloRequest(std::string_view body, HelloRequest* out);

// HELLO response.
struct HelloResponse {
  uint64_t arena_bytes = 0;
  std::string worker_address;  // "IP:PORT", at most kMaxAddressBytes
};
inline constexpr size_t kMaxAddressBytes = 256;
std::string EncodeHelloResponse(const HelloResponse& response);
Status DecodeHelloResponse(std::string_view body, HelloResponse* out);

// The body of EXIST, GET, RELEASE, FETCH and DIR_LOOKUP requests: `keys`.
// `max_keys`: kMaxKeysPerFrame, or kMaxFetchKeys for FETCH.
std::string EncodeKeys(const std::vector<std::string>& keys);
Status DecodeKeys(std::string_view body, std::vector<std::string>* keys,
                  uint32_t max_keys = kMaxKeysPerFrame);

// PUT_ALLOC request: one item per object to allocate.
struct PutAllocItem {
  std::string key;
  uint64_t size_bytes = 0;
};
std::string EncodePutAllocRequest(const std::vector<PutAllocItem>& items);
Status DecodePutAllocRequest(std::string_view body, std::vector<PutAllocItem>* out);

// PUT_ALLOC response: one answer per item.
struct PutAllocAnswer {
  uint8_t code = 0;     // AllocCode; values over 3 are a peer error the caller reports
  uint64_t offset = 0;  // into the arena, when code is kAllocated
};
std::string EncodePutAllocResponse(const std::vector<PutAllocAnswer>& answers);
Status DecodePutAllocResponse(std::string_view body, size_t n, std::vector<PutAllocAnswer>* out);

// PUT_SEAL request: one item per allocated object; commit false aborts it.
struct PutSealItem {
  std::string key;
  bool commit = false;  // on the wire u8; any non-zero byte commits
};
std::string EncodePutSealRequest(const std::vector<PutSealItem>& items);
Status DecodePutSealRequest(std::string_view body, std::vector<PutSealItem>* out);

// EXIST and PUT_SEAL responses: one byte per key (ExistCode; PUT_SEAL: 0 done, 1 unknown).
// SOFT_PIN request: `u32 ttl_ms` (0 = the worker's --default_kv_soft_pin_ttl), `keys`.
std::string EncodeSoftPinRequest(uint32_t ttl_ms, const std::vector<std::string>& keys);
Status DecodeSoftPinRequest(std::string_view body, uint32_t* ttl_ms,
                            std::vector<std::string>* keys);

std::string EncodeCodes(const std::vector<uint8_t>& codes);
Status DecodeCodes(std::string_view body, size_t n, std::vector<uint8_t>* out);

// GET response: one answer per key.
struct GetAnswer {
  uint8_t code = 0;  // GetCode; values over 3 are a peer error the caller reports
  uint64_t offset = 0;
  uint64_t size_bytes = 0;
};
std::string EncodeGetResponse(const std::vector<GetAnswer>& answers);
Status DecodeGetResponse(std::string_view body, size_t n, std::vector<GetAnswer>* out);

// DIR_PUT / DIR_DEL request.
struct DirUpdateRequest {
  std::string holder;  // "IP:PORT" of the worker holding the keys (checked by the worker)
  std::vector<std::string> keys;
};
std::string EncodeDirUpdateRequest(const DirUpdateRequest& request);
Status DecodeDirUpdateRequest(std::string_view body, DirUpdateRequest* out);

// DIR_LOOKUP response: one holder per key ("" = unknown), each at most kMaxAddressBytes.
std::string EncodeDirLookupResponse(const std::vector<std::string>& holders);
Status DecodeDirLookupResponse(std::string_view body, size_t n, std::vector<std::string>* out);

// FETCH response: per key `u8 found` then, when found, `string data`. `*objects` views
// `body`, which must outlive them; nullopt = not found. (The worker writes this body in
// parts straight from its arena: EncodeFetchHead gives the bytes before each object.)
Status DecodeFetchResponse(std::string_view body, size_t n,
                           std::vector<std::optional<std::string_view>>* objects);
std::string EncodeFetchHead(std::optional<uint32_t> size_bytes);  // nullopt: not found

}  // namespace tandem::pool
