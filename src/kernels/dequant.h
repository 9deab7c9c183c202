// Reference (naive, scalar) dequantizers for GGML block formats, and the Q8_0 quantizer.
//
// These are the readable ground truth that optimized kernels are tested against; they
// produce bit-identical results to ggml's reference `dequantize_row_*` (same operation
// order, no FMA contraction). Block layouts below are the on-disk GGUF layouts
// (little-endian, packed, no padding); "fp16" fields are IEEE binary16 bit patterns.
//
// Thread safety: pure functions; callers may run them concurrently on disjoint outputs.
#pragma once

#include <cstdint>

#include "common/tensor_type.h"
#include "kernels/half.h"

namespace tandem {

constexpr int64_t kQk = 32;    // elements per block of the "legacy" quants (Q4_0 ... Q8_0)
constexpr int64_t kQkK = 256;  // elements per super-block of the K-quants

// Q4_0, 18 bytes / 32 values: x = d * (q - 8), q in [0, 15].
// Nibble layout: qs[j] low nibble is value j, high nibble is value j + 16.
struct BlockQ4_0 {
  Fp16Bits d;
  uint8_t qs[kQk / 2];
};

// Q4_1, 20 bytes / 32 values: x = d * q + m, q in [0, 15]; nibbles as Q4_0.
struct BlockQ4_1 {
  Fp16Bits d;
  Fp16Bits m;
  uint8_t qs[kQk / 2];
};

// Q5_0, 22 bytes / 32 values: x = d * (q - 16), q in [0, 31]. The low 4 bits are nibbles
// as Q4_0; bit 4 of value j is bit j of the little-endian uint32 `qh`.
struct BlockQ5_0 {
  Fp16Bits d;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};

// Q5_1, 24 bytes / 32 values: x = d * q + m, q in [0, 31]; bits as Q5_0.
struct BlockQ5_1 {
  Fp16Bits d;
  Fp16Bits m;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};

// Q8_0, 34 bytes / 32 values: x = d * q, q a signed byte.
struct BlockQ8_0 {
  Fp16Bits d;
  int8_t qs[kQk];
};

// Q5_0x2 and Q4_0x2 (in memory only): two consecutive Q5_0 / Q4_0 blocks repacked at load
// for the int8 tile (RepackRowForTile, kernels/int8_tile.h), same values and scales. Tile
// byte j (0..31) of the pair's first half is the low nibble of qs[j], of its second half
// the high nibble (the halves in TilePosition's order, values stored + 16 / + 8). For
// Q5_0x2, bit 4 of first-half byte 8k+b (k 0..3, b 0..7) is bit 8b+4+k of the little-
// endian uint64 `qh`, of second-half byte 8k+b bit 8b+k: one broadcast and a 64-bit
// variable shift per half put each where the byte needs it.
struct BlockQ5_0x2 {
  Fp16Bits d[2];
  uint8_t qh[8];
  uint8_t qs[kQk];
};

struct BlockQ4_0x2 {
  Fp16Bits d[2];
  uint8_t qs[kQk];
};

// Q2_K, 84 bytes / 256 values in 16 sub-blocks of 16:
//   x = d * (scales[s] & 0xF) * q - dmin * (scales[s] >> 4), q in [0, 3].
// Each 128-value half uses 32 bytes of qs; value 32*k + l of that half (k in 0..3)
// is bits 2k..2k+1 of qs[l].
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];
  uint8_t qs[kQkK / 4];
  Fp16Bits d;
  Fp16Bits dmin;
};

// Q3_K, 110 bytes / 256 values in 16 sub-blocks of 16: x = d * (scale[s] - 32) * q,
// q in [-4, 3] = (2 low bits from qs, laid out as Q2_K) - (hmask bit clear ? 4 : 0).
// Value 32*k + l of the super-block (k in 0..7) takes bit k of hmask[l].
// The 16 6-bit scales are packed into 12 bytes: low nibble of scale s is
// scales[s] & 0xF for s < 8 and scales[s - 8] >> 4 otherwise; its high 2 bits are
// bits 2*(s/4)..2*(s/4)+1 of scales[8 + s%4].
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[12];
  Fp16Bits d;
};

// Q4_K, 144 bytes / 256 values in 8 sub-blocks of 32:
//   x = d * sc[s] * q - dmin * mn[s], q in [0, 15].
// 6-bit sc/mn packed in 12 bytes: for s < 4, sc = scales[s] & 63, mn = scales[s+4] & 63;
// else sc = (scales[s+4] & 0xF) | (scales[s-4] >> 6) << 4,
//      mn = (scales[s+4] >> 4) | (scales[s] >> 6) << 4.
// Each 64-value chunk c uses qs[32c .. 32c+31]: low nibbles are sub-block 2c, high
// nibbles sub-block 2c+1.
struct BlockQ4_K {
  Fp16Bits d;
  Fp16Bits dmin;
  uint8_t scales[12];
  uint8_t qs[kQkK / 2];
};

// Q5_K, 176 bytes / 256 values: as Q4_K with q in [0, 31]; bit 4 of value 32*s + l
// (sub-block s) is bit s of qh[l].
struct BlockQ5_K {
  Fp16Bits d;
  Fp16Bits dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};

// Q6_K, 210 bytes / 256 values in 16 sub-blocks of 16: x = d * scales[s] * (q - 32),
// q in [0, 63]. Per 128-value half h: ql[64h ..], qh[32h ..]; for l < 32 the values
// l, l+32, l+64, l+96 have low nibbles ql[l]&0xF, ql[l+32]&0xF, ql[l]>>4, ql[l+32]>>4
// and high 2 bits from qh[l] bits 0-1, 2-3, 4-5, 6-7.
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  Fp16Bits d;
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ5_0x2) == 44);
static_assert(sizeof(BlockQ4_0x2) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// True for the types DequantizeRow handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the in-memory Q5_0x2 / Q4_0x2.
bool CanDequantize(TensorType type);

// Expands `n_elems` values of `type` stored at `src` (any alignment) into dst[n_elems].
// Preconditions (checked): CanDequantize(type); n_elems is a multiple of the type's
// block size. src holds RowBytes(type, n_elems) bytes; src and dst do not overlap.
void DequantizeRow(TensorType type, const void* src, float* dst, int64_t n_elems);

// Quantizes src[n_elems] into n_elems / 32 Q8_0 blocks at dst (any alignment), with
// ggml's reference rounding (d = amax / 127 stored as fp16; q = round-half-away(x / d)
// using the unrounded d), so the bytes match ggml's quantize_row_q8_0_ref.
// Preconditions (checked): n_elems % 32 == 0. dst holds n_elems / 32 * 34 bytes.
void QuantizeRowQ8_0(const float* src, void* dst, int64_t n_elems);

}  // namespace tandem
