// KV cache element types (`--kv-cache-dtype`, vLLM's names) and how one cached row of
// keys or values is laid out, written and read back.
//
// A K (or V) row holds one token's keys (values) of every KV head, head after head. A
// head of head_dim values takes KvHeadBytes(dtype, head_dim) bytes:
//   f16       head_dim IEEE fp16 values (llama.cpp's default cache type; the default)
//   bf16      head_dim bfloat16 values (fp16's size, fp32's range)
//   fp8_e4m3  head_dim fp8 codes (1 sign, 4 exponent bits with bias 7, 3 mantissa
//   fp8_e5m2  bits; or 1-5-2 with bias 15), then a 4-byte float multiplier: one scale per
//             (token, head), amax / the format's largest finite value, so each head's
//             largest magnitude lands on the top code and small heads keep their
//             precision. vLLM's fp8 cache scales per tensor (1.0 unless calibrated);
//             per head costs 4 / head_dim bytes more and needs no calibration.
// The value of an fp8 code c with multiplier m is Widen(c) * m, where Widen(c) is the
// code's bits moved into an fp16 (e5m2: c << 8, exactly the fp16 of the same value;
// e4m3: sign << 8 | magnitude << 7, the value times 2^-8 for normal and subnormal codes
// alike) and m carries the 2^8 back. Every reader (scalar, AVX2, the tiled and the
// per-token attention kernels) computes exactly that product, so they agree bit for bit.
//
// Encoding rounds to nearest, ties to even; magnitudes past the top code saturate to it
// (fp8 has no infinity here). A head holding a NaN or an infinity gets a NaN multiplier,
// so the NaN reaches the attention output as it would through an fp16 cache.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem {

enum class KvDtype : uint8_t { kF16, kBf16, kFp8E4M3, kFp8E5M2 };

// "f16", "bf16", "fp8_e4m3", "fp8_e5m2" (the name in block hashes and logs).
const char* KvDtypeName(KvDtype dtype);
// --kv-cache-dtype: auto (= f16), fp16 / float16 / half, bf16 / bfloat16, fp8 (= e4m3, as
// vLLM), fp8_e4m3, fp8_e5m2; anything else is InvalidArgument naming the accepted values.
StatusOr<KvDtype> ParseKvCacheDtype(std::string_view name);
inline bool IsFp8(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4M3 || dtype == KvDtype::kFp8E5M2;
}

// Bytes of one head of head_dim values, and of a row of `dim` values (dim / head_dim
// heads). Preconditions: head_dim > 0; dim % head_dim == 0.
int64_t KvHeadBytes(KvDtype dtype, int head_dim);
int64_t KvRowBytes(KvDtype dtype, int64_t dim, int head_dim);

// Writes a row of dim floats (dim / head_dim heads) into `out` (KvRowBytes bytes).
void EncodeKvRow(KvDtype dtype, const float* x, int64_t dim, int head_dim, uint8_t* out);
// Reads one head (KvHeadBytes bytes at `head`) back into head_dim floats; AVX2 where
// the kernels' level has it, the same bits as the scalar code.
void DecodeKvHead(KvDtype dtype, const uint8_t* head, int head_dim, float* out);
// The scalar path of DecodeKvHead (the reference; tests compare the two).
void DecodeKvHeadScalar(KvDtype dtype, const uint8_t* head, int head_dim, float* out);

// One fp8 value, exactly (the reference the codecs are tested against). NaN codes
// (e4m3 S.1111.111, e5m2 S.11111.xx) decode to NaN, e5m2's infinities to infinity.
// The encoders round to nearest even and saturate, so a finite input never gives those
// codes; a NaN input gives the NaN code.
float Fp8E4M3ToFp32(uint8_t code);
float Fp8E5M2ToFp32(uint8_t code);
uint8_t Fp32ToFp8E4M3(float x);  // saturates at +-448
uint8_t Fp32ToFp8E5M2(float x);  // saturates at +-57344

}  // namespace tandem
