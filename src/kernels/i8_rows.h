// The W8A8 GEMM of per-output-channel int8 weights (TensorType::kI8Rows): the stored I8
// [rows, cols] tensor of a compressed-tensors `int-quantized` or msmodelslim W8A8
// checkpoint, read in place from the mapped file, against int8-quantized activations.
// MatMul (matmul.h) sends kI8Rows matrices here; the parameters are Int8RowParams.
//
// Numerics (the contract; every Int8Kernel and every batch size gives these bits, so a
// token's outputs never depend on which tokens share its call, on the thread that ran
// them, or on the ISA level):
//   1. Activations, per token row x[0..cols):
//      dynamic (act_scale == 0), as vLLM's scaled_int8_quant (dynamic, symmetric):
//        amax = max_k |x[k]|, s_t = amax / 127.0f, xq[k] = q8(x[k] * (127.0f / amax));
//        an all-zero row gives s_t = 0 and xq = 0 (never NaN);
//      static (act_scale > 0), msmodelslim W8A8's per-tensor input_scale / input_offset:
//        xq[k] = q8(x[k] / act_scale + act_offset);
//      q8(v) = clamp(nearbyint(v), -128, 127): round half to even (the default rounding
//      mode), a NaN to -128. Each step is one IEEE float operation in this order.
//   2. dot[t][r] = sum_k xq[t][k] * q[r][k], exact, formed in int32: with |product| <=
//      128 * 128 = 2^14 a row of cols <= kI8MaxExactCols = 131,071 cannot overflow
//      (the dynamic range [-127, 127] against int8 weights would allow 132,104, and
//      127 x 127 products alone 133,144). Wider rows are summed in K slices of
//      kI8SliceCols (int32 each, exact) added in int64; such a dot is exact too.
//   3. One chain of float operations per output, in this order (f = (float), rounding
//      to nearest; no fused multiply-add: the files are built with -ffp-contract=off):
//        dynamic, no offset:  y = s_t * (scale[r] * f(dot))
//        dynamic, offset:     y = s_t * (scale[r] * (f(dot) - offset[r] * f(sum_k xq[t][k])))
//        static:              y = scale[r] * f(dot + bias[r])   (bias 0 when null; the sum
//                             in int32, exact while |dot + bias| < 2^31; int64 for sliced rows)
//      (vLLM's epilogue order: the activation scale last.)
//
// Kernels (all give the integers of 2 exactly; see i8_rows_internal.h for the files). The
// activations are stored as u = xq + 128 (unsigned, prepared once per call), so the
// weights go in as stored and every vector form takes sum_k u[k] * q[r][k] =
// dot + 128 * sum_k q[r][k], then takes 128 times the weight row's sum back out. Those
// sums may wrap int32; the arithmetic is modulo 2^32, so what is left is the exact dot,
// which fits. (For the same reason a prompt's rows may be summed in column chunks.)
//   kScalar      int32 loops on xq
//   kAvx2        u and q widened to int16, vpmaddwd (exact: |u * q| <= 255 * 128; the
//                vpmaddubsw sign trick is not exact for int8 x int8, sign(-128) wraps)
//   kAvxVnni     256-bit vpdpbusd (u unsigned, q signed)
//   kAvx512Vnni  the same on zmm
// Each multiplies a group of weight rows by a group of tokens per pass over the columns
// (4 x 4 on zmm, 4 x 2 on ymm), so a prompt's GEMM reads each weight vector once per
// group of tokens; the weight row sums are taken in the same pass as a block's first
// group of tokens and given to the others. Decode (up to kMaxTokensForRuns tokens) takes
// the rows in interleaved runs (row_runs.h). An AMX-INT8 tile path (its int32 tile sums
// are the same integers, so the bits stay) is a later issue: it would be one more case
// of the dispatch in i8_rows.cc (Dots).
//
// Thread safety: pure functions (the products use thread_local scratch).
#pragma once

#include <cstdint>

#include "kernels/int8_tile.h"
#include "kernels/matmul.h"

namespace tandem {

// Columns whose int8 dot cannot overflow int32 (2^31 - 1 >= 2^14 * cols).
constexpr int64_t kI8MaxExactCols = 131071;
// K slice width of wider rows.
constexpr int64_t kI8SliceCols = 65536;
// The widest rows taken (sum(xq) in int32 stays exact).
constexpr int64_t kI8MaxCols = int64_t{1} << 24;

// Bytes of one quantized activation row: cols rounded up to 64 (past cols xq = 0,
// stored as 128), so the vector kernels load whole registers of activations.
inline int64_t I8RowStride(int64_t cols) { return (cols + 63) / 64 * 64; }
// K slices of a row of `cols` values: 1 up to kI8MaxExactCols.
inline int64_t I8Slices(int64_t cols) {
  return cols <= kI8MaxExactCols ? 1 : (cols + kI8SliceCols - 1) / kI8SliceCols;
}

// One activation row quantized as 1 above: u[I8RowStride(cols)] = xq + 128 (128 past
// cols: xq = 0), *s_t = its scale (dynamic; 0 when static), *sum = sum_k xq[k].
// act_scale == 0: dynamic. Every kernel gives the same bytes.
// Preconditions: act_scale >= 0; cols <= kI8MaxCols.
void QuantizeI8Activations(const float* x, int64_t cols, float act_scale, float act_offset,
                           uint8_t* u, float* s_t, int32_t* sum,
                           Int8Kernel kernel = ChosenInt8Kernel());

// Quantized activation rows, as MatMulInput holds them for kI8Rows weights.
struct I8Tokens {
  const uint8_t* u = nullptr;    // [n_tokens, stride]: xq + 128 (64-byte aligned rows are faster)
  int64_t stride = 0;            // I8RowStride(cols)
  const float* s = nullptr;      // [n_tokens] s_t (dynamic); unused when static
  const int32_t* sum = nullptr;  // [n_tokens] sum of xq
};

// y[t * w.rows + r] for t < n_tokens and r0 <= r < r1: the product of 3 above, the
// activations quantized with w.i8's parameters.
// Preconditions: I8RowsCheck(w) holds; x holds n_tokens rows of w.cols values.
void I8RowsProduct(const WeightMatrix& w, const I8Tokens& x, int64_t n_tokens, float* y, int64_t r0,
                   int64_t r1, Int8Kernel kernel = ChosenInt8Kernel());

// CHECKs that w is a usable kI8Rows matrix: i8 and its scales set, row_bytes >= cols,
// cols <= kI8MaxCols, no weight offsets with static activations, act_scale >= 0 and finite.
void I8RowsCheck(const WeightMatrix& w);

}  // namespace tandem
