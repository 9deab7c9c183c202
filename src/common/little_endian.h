// Little-endian integers in byte buffers, byte by byte so the result does not depend on
// the host's byte order: the codec of the pool and KV-transfer wire formats
// (docs/POOL.md, docs/KV_TRANSFER.md) and of the block-hash input (kv/block_hash.h).
//
// T is an unsigned integer type and is always named at the call
// (`little_endian::Store<uint16_t>(p, v)`), so the width written is the width meant.
// Loads and stores read or write exactly sizeof(T) bytes; bounds are the caller's.
// Thread safety: pure functions.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tandem::little_endian {

// Writes `value` to p[0, sizeof(T)), least significant byte first.
template <std::unsigned_integral T>
constexpr void Store(uint8_t* p, std::type_identity_t<T> value) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

// The value stored at p[0, sizeof(T)).
template <std::unsigned_integral T>
constexpr T Load(const uint8_t* p) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return value;
}

// Appends the sizeof(T) bytes of `value` to `*out`.
template <std::unsigned_integral T>
void Append(std::string* out, std::type_identity_t<T> value) {
  uint8_t bytes[sizeof(T)];
  Store<T>(bytes, value);
  out->append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

}  // namespace tandem::little_endian
