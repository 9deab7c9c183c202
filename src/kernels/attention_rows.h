// Attention over cached key/value rows: the scores of a query against rows of keys and
// the probability-weighted sum of rows of values, the per-token attention kernels of
// the forward pass (the tiled prefill kernel, attention_tiled.h, gives the same bits).
//
// Rows may live in different KV blocks, hence arrays of row pointers; each pointer is
// one head of hd values. The F16 functions read fp16 rows; the Kv functions read heads
// of any KvDtype (kv_dtype.h: fp16, bf16, fp8 with a per-head multiplier), each value
// widened to float exactly as DecodeKvHead does, then the F16 functions' arithmetic in
// the same order, so an f16 cache gives the F16 functions' bits through either entry.
//
//   scores[j] = scale * dot(q, k_rows[j])        (q in float, hd values)
//   out[d]    = sum_j p[j] * v_rows[j][d]        (out overwritten)
//
// AVX2 paths do four keys per pass over q and keep a 64-wide slice of `out` in
// registers across all rows; the Group functions serve g query heads sharing the rows
// (GQA), reading and widening each row once for up to four heads, every head's result
// equal to the one-head function's bit for bit. hd % 8 != 0 runs scalar code.
// Thread safety: reentrant (scratch is thread-local).
#pragma once

#include <cstdint>

#include "kernels/kv_dtype.h"

namespace tandem {

void DotF16Rows(const float* q, const uint16_t* const* k_rows, int64_t n, int hd, float scale,
                float* scores);
void WeightedSumF16Rows(const float* p, const uint16_t* const* v_rows, int64_t n, int hd,
                        float* out);
// q[h] / scores[h] / p[h] / out[h] per head, h < g.
void DotF16RowsGroup(const float* const* q, int g, const uint16_t* const* k_rows, int64_t n, int hd,
                     float scale, float* const* scores);
void WeightedSumF16RowsGroup(const float* const* p, int g, const uint16_t* const* v_rows, int64_t n,
                             int hd, float* const* out);

// The MLA attention's kernels, in llama.cpp's decode-path order (ggml_vec_dot_f16, which
// its non-flash attention runs for one query token): scores[h][j] = scale *
// dot(q[h], k_rows[j]) over hd values, and out[h][d] = sum_j p[h][j] * v[j][d] over n
// positions, V given transposed (vt[d * vt_stride + j], as llama.cpp's kqv reads its
// transposed V; TransposeF16Rows makes it from rows). Each dot: four 8-lane float
// accumulators over steps of 32 values, folded (a0 + a2) + (a1 + a3), the 128-bit halves
// added, two horizontal adds, the last n % 32 products added in double; the weighted
// sums count their positions as padded to a multiple of 32 with zero probabilities
// (llama.cpp's KV rows are padded to 256 cells, masked). q and p hold fp16-exact values
// (rounded by the caller, as llama.cpp converts them to the fp16 of the cache). Every ISA
// level gives the same bits.
void DotF16RowsGgml(const float* const* q, int g, const uint16_t* const* k_rows, int64_t n, int hd,
                    float scale, float* const* scores);
// vt[d * vt_stride + j] = rows[j][d] for j < n, d < hd.
void TransposeF16Rows(const uint16_t* const* rows, int64_t n, int hd, uint16_t* vt, int64_t vt_stride);
void WeightedSumF16ColumnsGgml(const float* const* p, int g, const uint16_t* vt, int64_t vt_stride, int64_t n,
                               int hd, float* const* out);

// The same over heads of `dtype` (k_heads[j] points at KvHeadBytes(dtype, hd) bytes).
void DotKvRowsGroup(KvDtype dtype, const float* const* q, int g, const uint8_t* const* k_heads,
                    int64_t n, int hd, float scale, float* const* scores);
void WeightedSumKvRowsGroup(KvDtype dtype, const float* const* p, int g,
                            const uint8_t* const* v_heads, int64_t n, int hd, float* const* out);

}  // namespace tandem
