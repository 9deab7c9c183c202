// Dot products of quantized weight rows with quantized activations (the W8A8 path).
//
// As in llama.cpp, each weight type is paired with an activation format: Q8_0, Q5_0 and
// Q4_0 weights with Q8_0 activations (32 int8 + one fp16 scale), Q4_1/Q5_1 with Q8_1,
// the K-quants with Q8_K activations (256 int8 + one float scale + sums of 16), and the float types
// with float activations rounded to the weight's precision (F16 -> fp16, BF16 -> bf16).
// Block sums are exact integer arithmetic; only the float accumulation order differs
// between the scalar references and the AVX2 paths.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "common/tensor_type.h"

namespace tandem {

enum class ActivationFormat { kF32, kF16Rounded, kBF16Rounded, kQ8_0, kQ8_1, kQ8_K };

// Q8_1, 36 bytes / 32 values: x = d * q; s = d * sum(q) (both fp16). Pairs with Q4_1/Q5_1.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Q8_K, 292 bytes / 256 values: x = d * q; bsums[i] = sum of q[16i .. 16i+15].
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

ActivationFormat ActivationFormatFor(TensorType weight_type);

// Bytes of one activation row of `cols` values in `format`.
int64_t ActivationRowBytes(ActivationFormat format, int64_t cols);

// Converts x[cols] into the activation format at out (ActivationRowBytes bytes).
void QuantizeActivations(ActivationFormat format, const float* x, int64_t cols, void* out);

// ggml's quantize_row_q8_K_ref: per 256 values, scale by -127 / (the signed value of
// largest magnitude), round half to even, clamp at 127. Preconditions: cols % 256 == 0.
void QuantizeRowQ8_K(const float* x, BlockQ8_K* out, int64_t cols);

// ggml's quantize_row_q8_1_ref. Preconditions: cols % 32 == 0.
void QuantizeRowQ8_1(const float* x, BlockQ8_1* out, int64_t cols);

// True if `type` is computed with integer dots against Q8_0 / Q8_1 / Q8_K activations.
bool HasQ8Dot(TensorType type);

// dot(weight row of `type`, activation row) over `cols` values.
// Preconditions: HasQ8Dot(type); rows hold `cols` values in their formats.
float VecDotQ8(TensorType type, const void* w_row, const void* a_row, int64_t cols);

// The prefill GEMM tile for Q8_0, Q5_0 and Q4_0 weights (MatMul, many tokens). Weight
// rows are decoded once per call into plain bytes: Q8_0 as its int8 values, Q5_0 and
// Q4_0 as unsigned values (stored + 16, + 8) so that `vpmaddubsw` takes them without
// a sign fix-up; the offset comes back out through per-block integer corrections carried
// by the activation rows (offset * sum of the block's activation values). Scales of each
// pair of 32-blocks are laid out as the tile's lanes need them: [d0 d0 d1 d1 d0 d0 d1 d1].
// Integer sums are exact; only float accumulation order differs from VecDotQ8.
bool HasInt8Tile(TensorType type);
// 0 for Q8_0, 16 for Q5_0, 8 for Q4_0.
int Int8TileOffset(TensorType type);
// Preconditions: HasInt8Tile(type); cols % 64 == 0; q holds cols bytes, d_lanes cols / 8 floats.
void PrepareTileWeightRow(TensorType type, const void* w_row, int64_t cols, uint8_t* q, float* d_lanes);
// x quantized exactly as QuantizeActivations(kQ8_0) does (same int8 values, same fp16
// scales), in the tile's layout; corr holds cols / 8 int32 (one 8-lane vector per pair).
// Preconditions: cols % 64 == 0.
void PrepareTileActivationRow(const float* x, int64_t cols, int offset, int8_t* q, float* d_lanes, int32_t* corr);

struct TileOperand {
  const void* q;        // weight: uint8_t[cols]; activation: int8_t[cols]
  const float* d_lanes;  // [cols / 8]
  const int32_t* corr;  // activation rows only: [cols / 8]
};
// out[r][t] = dot(weight row r, activation row t) for 4 weight rows x 2 activation rows,
// over n_pairs pairs of 32-blocks. a1 may equal a0 (odd token count).
void DotInt8Tile4x2(int offset, const TileOperand w[4], const TileOperand& a0, const TileOperand& a1,
                    int64_t n_pairs, float out[4][2]);
// One weight row straight from its stored blocks against one prepared activation row:
// the same lanes and the same float steps as the tile, so a token gets the same bits
// whether it is multiplied alone (decode) or in a batch (batching never changes outputs).
float DotTileRow(TensorType type, const void* w_row, const TileOperand& a, int64_t n_pairs);

// Four activation rows against one weight row; each out[t] equals
// VecDotQ8(type, w_row, a_rows[t], cols) bit for bit. HasMultiTokenDot says whether
// this saves work for `type` (the K-quants, whose blocks are costly to unpack).
bool HasMultiTokenDot(TensorType type);
void VecDotQ8x4(TensorType type, const void* w_row, const void* const a_rows[4], int64_t cols, float out[4]);

// The scalar references (exposed for tests).
float VecDotQ8Reference(TensorType type, const void* w_row, const void* a_row, int64_t cols);

}  // namespace tandem
