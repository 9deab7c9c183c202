// Tiled causal attention for prefill chunks over cached keys and values (any KvDtype).
//
// One sequence's chunk of n_q query tokens at positions [pos0, pos0 + n_q) attends to
// its cached prefix and to itself: query i (position p = pos0 + i) sees key positions
// [lo(p), p], lo(p) = 0, or p - window + 1 (at least 0) under a sliding window.
//
// The work is cut into query tiles x KV tiles: each KV tile's rows are widened to
// float once (DecodeKvHead) and used by every query row of the tile and every query head of the GQA
// group, where the per-token kernels (attention_rows.h DotKvRowsGroup / WeightedSumKvRowsGroup)
// read a token's whole key range once per query token. KV tiles outside every row's
// causal range or window are never read. Per query tile: the scores of all its rows
// (pass 1, per KV tile), the softmax of each row over its whole range (pass 2), the
// weighted sums of V (pass 3, per KV tile); scores take rows x group x range floats of
// scratch (4 MiB for 16 rows of 4 heads at 16,384 keys), far less than the K/V traffic
// saved.
//
// Numerics: exactly the per-token path's (scores as DotKvRowsGroup, ops.h Softmax, the
// probabilities rounded to fp16 as llama.cpp's non-flash path does, the weighted sum in
// WeightedSumKvRowsGroup's order), so at the same ISA level the bits are the same as
// the per-token kernels' (tested), whatever the tiling, chunking or thread count. q is
// taken as given (the caller rounds it to fp16 to meet the fp16 keys). An online
// softmax (flash attention) would read K and V in one pass but cannot round the
// probabilities the same way; the scores' scratch buys exactness instead.
//
// Thread safety: TiledAttention is reentrant; calls for distinct (query range, KV head)
// pairs write disjoint outputs and may run in parallel.
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/kv_dtype.h"

namespace tandem {

struct TiledAttentionProblem {
  // Query head h of query i: q + i * q_stride + h * head_dim (head_dim floats).
  const float* q = nullptr;
  int64_t q_stride = 0;
  // Output of head h for query i: out + i * out_stride + h * head_dim (overwritten).
  float* out = nullptr;
  int64_t out_stride = 0;
  int64_t n_q = 0;   // query tokens in the chunk
  int64_t pos0 = 0;  // position of query 0
  // Key / value row of position j: k_rows[j - row0] (KV head h at + h *
  // KvHeadBytes(kv_dtype, head_dim)), for row0 <= j < pos0 + n_q. row0 must be <= lo(pos0).
  const uint8_t* const* k_rows = nullptr;
  const uint8_t* const* v_rows = nullptr;
  KvDtype kv_dtype = KvDtype::kF16;
  int64_t row0 = 0;
  int64_t window = 0;  // sliding window in tokens; 0 = none (full causal)
  int n_heads = 0;     // query heads; a multiple of n_kv_heads
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // score = scale * dot(q, k)
};

// Computes the outputs of queries [q_begin, q_end) for the query heads of KV head `kvh`
// (heads kvh * group .. (kvh + 1) * group - 1), with the kernels of KernelIsaLevel().
// Preconditions: 0 <= q_begin < q_end <= p.n_q, 0 <= kvh < p.n_kv_heads.
void TiledAttention(const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end, int kvh);
// The same at a given level (tests run every level the CPU has in one process). The
// avx512 level (two keys per register, a 32-wide weighted sum) gives the AVX2 level's
// bits. Where head_dim % 8 != 0 the vector levels run scalar code, as the per-token
// kernels do.
void TiledAttentionAt(IsaLevel isa, const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end,
                      int kvh);

// Query rows per task for a chunk of n_q queries and n_kv_heads heads on `threads`
// threads: at most 16 (bounding the scores' scratch), fewer when that leaves fewer than
// four tasks per thread, at least 4.
int64_t TiledAttentionQueryTile(int64_t n_q, int n_kv_heads, int threads);

// Key rows a query tile [q_begin, q_end) reads, summed over its rows (its cost, for
// balancing tasks between threads).
int64_t TiledAttentionCost(const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end);

}  // namespace tandem
