// Q8_0 and Q5_0 weights times Q8_0 activations (MatMul's path for Q8_0, at any token
// count; for Q5_0 where TANDEM_LLAMA_ORDER says), in llama.cpp's x86 summation order.
//
// llama.cpp multiplies these types on x86 with tinyBLAS_Q0_AVX (two tokens or more) and
// ggml_vec_dot_q8_0_q8_0 / ggml_vec_dot_q5_0_q8_0 (one), both in the same order: per
// 32-block, 8 int32 lanes of 4 products each (lane j: values 4j .. 4j + 3, exact), then
// per lane acc_j = fma(d_w * d_x, lane_j, acc_j) block after block, and at the end
// ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7)). Every kernel
// here takes those float steps lane by lane, and VecDotQ8 takes them for one token, so a
// token's output has the same bits alone or in a batch, at every Int8Kernel, and equals
// llama.cpp's (its AVX2 build; the goldens of the tests come from it).
//
// How the integers are formed: the weights go in unsigned (Q8_0: w + 128, Q5_0: its
// stored 5-bit value, w + 16), the first operand of vpdpbusd, against the signed
// activations, and each lane starts from -offset * (the sum of its 4 activations), laid
// out with the tokens; plain AVX2 (no VNNI) takes llama.cpp's own sign trick instead.
// Both give the exact lane sums.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor_type.h"
#include "kernels/int8_tile.h"

namespace tandem {

// True for the weight types these kernels take (Q8_0, Q5_0).
bool HasQ0Gemm(TensorType type);

// Whether MatMul sums `type` in llama.cpp's order here: the types TANDEM_LLAMA_ORDER names
// (a comma-separated subset of q8_0, q5_0, or `none`; default q8_0), read once. Q5_0 is
// off by default (its load-time repacked tile layout decodes faster; with
// TANDEM_NO_REPACK=1 every Q5_0 matrix is plain Q5_0), `none` keeps Q8_0 on the int8 tile
// (8 products per float lane: faster where the LM head computes, llama.cpp's bits lost;
// docs/PERFORMANCE.md). A bad value: a warning and the default.
bool SumsInLlamaCppOrder(TensorType type);
// "q8_0", "q8_0,q5_0" or "none": the setting in force (the kernels' log line).
std::string LlamaCppOrderTypes();

// The weights' offset: 128 for Q8_0, 16 for Q5_0.
int Q0Offset(TensorType type);

// One weight row as the tile takes it, prepared once per tile of rows: per 32-block b its
// 32 values + Q0Offset at u + 32 b (unsigned, natural order) and its scale at d[b].
struct Q0Row {
  const uint8_t* u;
  const float* d;
};
// Preconditions: HasQ0Gemm(type); w_row holds n_blocks stored blocks of `type`; u has
// 32 * n_blocks bytes, d n_blocks floats.
void PrepareQ0Row(TensorType type, const void* w_row, int64_t n_blocks, uint8_t* u, float* d);

// Q8_0 activation rows laid out once per MatMul, tokens in pairs (an odd count repeats
// the last token) and pairs in groups of kQ0GroupPairs (the last group may be short): one
// record of kQ0RecordBytes per (pair, block), a group's records block by block, and within
// a block its pairs side by side, so a kernel reaches a group's pairs at fixed offsets
// while the blocks stream in order. A record: 64 bytes [x_t0 | x_t1] (signed), 16 float
// scale lanes [d_t0 x 8 | d_t1 x 8], then 16 int32 lanes -offset * [s_t0 | s_t1] where s_j
// is the sum of lane j's 4 values (the weights' Q0Offset: the layout is for one weight
// type); so an avx512 operand is one load, and token t's 256-bit operands sit at
// 32 * (t % 2) in each part.
constexpr int64_t kQ0RecordBytes = 192;
constexpr int kQ0GroupPairs = 8;
struct Q0Tokens {
  std::vector<uint8_t> data;
  int64_t n_blocks = 0;
  int n_tokens = 0;
  int n_token_pairs = 0;
};
// rows: n_tokens BlockQ8_0 rows (QuantizeActivations(kQ8_0)) of row_bytes bytes each.
// Preconditions: HasQ0Gemm(type): the weights the tokens will meet.
void PairQ0Tokens(TensorType type, const uint8_t* rows, int64_t row_bytes, int n_tokens, int64_t n_blocks,
                  Q0Tokens* out);

// The tile: out[r][k] = dot(w[r], token 2 * h0 + k) for r < 4 and k < 2 * n_h (1 <= n_h
// <= 4; where the count is odd a pair's second output repeats its first token).
// Preconditions: h0 + n_h <= a.n_token_pairs, pairs h0 .. h0 + n_h - 1 in one group of
// kQ0GroupPairs; each w[r] prepared for a.n_blocks blocks; all four rows of one type.
void DotQ0Tile(TensorType type, const Q0Row w[4], const Q0Tokens& a, int h0, int n_h, float out[4][8],
               Int8Kernel kernel = ChosenInt8Kernel());

// The row path (decode, a few tokens; no preparation of the weights): y[t * y_stride + r]
// = dot(row r of w, token t) for r < rows and t < a.n_tokens, each stored row read once for
// all the tokens. The same bits as DotQ0Tile.
// Preconditions: HasQ0Gemm(type); rows of row_bytes bytes holding a.n_blocks blocks.
void DotQ0Rows(TensorType type, const uint8_t* w, int64_t row_bytes, int64_t rows, const Q0Tokens& a, float* y,
               int64_t y_stride, Int8Kernel kernel = ChosenInt8Kernel());

}  // namespace tandem
