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
#include <vector>

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

// Four activation rows against one weight row; each out[t] equals
// VecDotQ8(type, w_row, a_rows[t], cols) bit for bit. HasMultiTokenDot says whether
// this saves work for `type` (the K-quants, whose blocks are costly to unpack).
bool HasMultiTokenDot(TensorType type);
void VecDotQ8x4(TensorType type, const void* w_row, const void* const a_rows[4], int64_t cols, float out[4]);
// Eight activation rows, the same bits (at the avx512 level one pass over the weight row
// for all eight, two tokens per register; elsewhere two VecDotQ8x4).
void VecDotQ8x8(TensorType type, const void* w_row, const void* const a_rows[8], int64_t cols, float out[8]);

// Q8_K activation rows paired for the avx512 K-quant dots, once per MatMul: per token
// pair h (tokens 2h, 2h + 1; an odd count repeats the last) and super-block i, a record at
// (h * n_blocks + i) * kPairedQ8KRecordBytes: the 8 32-byte chunks of qs as [t0 | t1]
// (64 bytes each), the bsums [t0 | t1] at 512, the two scales d at 576.
constexpr int64_t kPairedQ8KRecordBytes = 640;
struct PairedQ8K {
  std::vector<uint8_t> data;
  int64_t n_blocks = 0;
  int n_token_pairs = 0;
};
// Whether VecDotQ8KPaired8 runs for `type` here (the avx512 level and a K-quant).
bool HasPairedQ8KDot(TensorType type);
// rows: n_tokens Q8_K activation rows of row_bytes bytes each (n_blocks super-blocks).
void PairQ8KRows(const uint8_t* rows, int64_t row_bytes, int n_tokens, int64_t n_blocks, PairedQ8K* out);
// out[k] = VecDotQ8(type, w_row, token 2 * h0 + k), k < 8, the same bits.
// Preconditions: HasPairedQ8KDot(type); h0 + 4 <= a.n_token_pairs.
void VecDotQ8KPaired8(TensorType type, const void* w_row, const PairedQ8K& a, int h0, float out[8]);
// The same for n_pairs (1..4) token pairs: out[k], k < 2 * n_pairs (a last odd token's
// pair repeats it). Preconditions: HasPairedQ8KDot(type); h0 + n_pairs <= a.n_token_pairs.
void VecDotQ8KPaired(TensorType type, const void* w_row, const PairedQ8K& a, int h0, int n_pairs, float* out);

// The scalar references (exposed for tests).
float VecDotQ8Reference(TensorType type, const void* w_row, const void* a_row, int64_t cols);

}  // namespace tandem
