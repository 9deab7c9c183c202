// The int8 GEMM tile for Q8_0, Q5_0 and Q4_0 weights (MatMul's path for these types),
// and the Q5_0x2 / Q4_0x2 layouts those are repacked into at load.
//
// Thread safety: pure functions (DotTileRow's scalar fallback uses thread_local scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor_type.h"

namespace tandem {

// The int8 dot kernels, one per instruction-set flavour. Every one gives the same bits:
// the integer sums are exact (`vpdpbusd` gives the integers `vpmaddubsw` + `vpmaddwd`
// give here, whose int16 pair sums never saturate on these operands), and each output
// takes the same float steps lane by lane in the same order: the avx512 kernels put two
// tokens in the two 256-bit halves of a register instead of widening a token's lanes.
//   kScalar      the portable path
//   kAvx2        vpmaddubsw + vpmaddwd on ymm
//   kAvxVnni     AVX-VNNI: vpdpbusd in its VEX (256-bit) form
//   kAvx512Vnni  AVX-512 VNNI: zmm with two tokens per register (4 weight rows x 4 tokens
//                per tile, up to 16 tokens per decoded weight pair in the row path)
enum class Int8Kernel { kScalar, kAvx2, kAvxVnni, kAvx512Vnni };
const char* Int8KernelName(Int8Kernel kernel);
// The kernel KernelIsaLevel() selects: avx512 -> kAvx512Vnni; avx2 -> kAvxVnni where the
// CPU has AVX-VNNI, else kAvx2; scalar -> kScalar. Chosen once.
Int8Kernel ChosenInt8Kernel();
// Every kernel this CPU can run, whatever TANDEM_ISA says (the tests compare them all).
std::vector<Int8Kernel> RunnableInt8Kernels();

// The prefill GEMM tile for Q8_0, Q5_0 and Q4_0 weights (many tokens). MatMul sends Q8_0
// to q0_gemm.h (llama.cpp's summation order) and Q5_0 / Q4_0 here, Q8_0 too with
// TANDEM_LLAMA_ORDER=none (q0_gemm.h SumsInLlamaCppOrder). Weight
// rows are decoded once per call into plain bytes: Q8_0 as its int8 values, Q5_0 and
// Q4_0 as unsigned values (stored + 16, + 8) so that `vpmaddubsw` takes them without
// a sign fix-up; the offset comes back out through per-block integer corrections carried
// by the activation rows (offset * sum of the block's activation values).
//
// Layout of each pair of 32-blocks (64 values, weights and activations alike): the two
// blocks' 32-bit groups of 4 values interleaved as `vpunpckldq` / `vpunpckhdq` of the
// blocks leave them (TilePosition), so that int32 lane j of the sum of the two 32-byte
// halves' `vpmaddubsw`+`vpmaddwd` holds 8 products of one block, block j % 2, with no
// horizontal add. Scale lanes of a pair: [d0 d1 d0 d1 d0 d1 d0 d1]; corrections in lanes
// 0 (first block) and 1 (second). Integer sums are exact; only float accumulation order
// differs from VecDotQ8.
bool HasInt8Tile(TensorType type);
// 0 for Q8_0, 16 for Q5_0, 8 for Q4_0.
int Int8TileOffset(TensorType type);
// Byte offset, within a pair's 64 bytes, of value i (0..63; 0..31 the first block).
int TilePosition(int i);
// Bytes of one prepared weight row: cols, or 2 * cols for Q8_0, whose pairs hold the
// magnitudes |w| (64 bytes, tile order) and then the values (64 bytes, for their signs).
int64_t TileWeightRowBytes(TensorType type, int64_t cols);
// Preconditions: HasInt8Tile(type); cols % 64 == 0; q holds TileWeightRowBytes(type, cols)
// bytes, d_lanes cols / 8 floats.
void PrepareTileWeightRow(TensorType type, const void* w_row, int64_t cols, uint8_t* q,
                          float* d_lanes);
// x quantized exactly as QuantizeActivations(kQ8_0) does (same int8 values, same fp16
// scales), in the tile's layout; corr holds cols / 8 int32 (one 8-lane vector per pair).
// Preconditions: cols % 64 == 0.
void PrepareTileActivationRow(const float* x, int64_t cols, int offset, int8_t* q, float* d_lanes,
                              int32_t* corr);

// Load-time repacking (llama.cpp's CPU "repack" idea, with the tile's own layout): the
// layout RepackRowForTile turns `type` into, Q5_0 -> Q5_0x2 and Q4_0 -> Q4_0x2 (see
// BlockQ5_0x2 in dequant.h), or `type` itself where there is none.
TensorType TileRepackedType(TensorType type);
// One row of cols values (cols % 64 == 0) of a Q5_0 / Q4_0 matrix rewritten as
// TileRepackedType(type): the same values and scales in the same bytes per row, already
// in tile order with bit 4 placed for one shift, so the tile and DotTileRow(s) decode a
// pair with ~half the instructions. Products and sums are unchanged (same bits).
// Preconditions: TileRepackedType(type) != type; dst does not overlap src.
void RepackRowForTile(TensorType type, const void* src, int64_t cols, void* dst);
// dst[cols] = the values of a Q5_0x2 / Q4_0x2 row: those DequantizeRow gives for the row
// it was repacked from.
void DequantizeRepackedRow(TensorType type, const void* src, float* dst, int64_t cols);

struct TileOperand {
  const void* q;         // weight: uint8_t[TileWeightRowBytes]; activation: int8_t[cols]
  const float* d_lanes;  // [cols / 8]
  const int32_t* corr;   // activation rows only: [cols / 8]
};
// out[r][t] = dot(weight row r, activation row t) for 4 weight rows x 2 activation rows,
// over n_pairs pairs of 32-blocks. a1 may equal a0 (odd token count).
void DotInt8Tile4x2(int offset, const TileOperand w[4], const TileOperand& a0,
                    const TileOperand& a1, int64_t n_pairs, float out[4][2],
                    Int8Kernel kernel = ChosenInt8Kernel());
// The same for 4 activation rows (MatMul's tile; repeated rows are fine): one pass of
// the avx512 kernel, two 4x2 tiles on the others. Same bits as DotInt8Tile4x2.
void DotInt8Tile4x4(int offset, const TileOperand w[4], const TileOperand a[4], int64_t n_pairs,
                    float out[4][4], Int8Kernel kernel = ChosenInt8Kernel());
// The portable path of DotInt8Tile4x2 (taken where AVX2 is missing): the same integers,
// fused multiply-adds and horizontal sum, lane by lane, so it gives the same bits.
void DotInt8Tile4x2Scalar(int offset, const TileOperand w[4], const TileOperand a[2],
                          int64_t n_pairs, float out[4][2]);
// Activation rows laid out for the avx512 kernels, once per call: per token pair h (tokens
// 2h, 2h + 1; an odd count repeats the last token) and weight pair p, at slot
// h * n_pairs + p: 128 bytes [t0 x0 | t1 x0 | t0 x1 | t1 x1] (the pair's two 32-byte
// halves of each token), 16 scale lanes [t0 | t1] and 16 negated corrections, so each
// operand is one full-register load. flip_signs stores x ^ 0x80 (x + 128, unsigned: the
// row path's Q8_0 form, see int8_tile_avx512.cc).
struct PairedTileTokens {
  std::vector<uint8_t> x;
  std::vector<float> d;
  std::vector<int32_t> neg_corr;
  int64_t n_pairs = 0;
  int n_token_pairs = 0;
};
void PairTileTokens(const TileOperand* a, int n_tokens, int64_t n_pairs, bool flip_signs,
                    PairedTileTokens* out);
// The avx512 tile on paired tokens (not flipped): out[r][2k + i] = dot(weight row r, token
// 2 * (h0 + k) + i) for k < n_h <= 4 token pairs. Same bits as DotInt8Tile4x2.
// Preconditions: ChosenInt8Kernel() is (or the CPU runs) kAvx512Vnni.
void DotInt8TilePaired(int offset, const TileOperand w[4], const PairedTileTokens& t, int h0,
                       int n_h, float out[4][8]);

// One weight row straight from its stored blocks against one prepared activation row:
// the same lanes and the same float steps as the tile, so a token gets the same bits
// whether it is multiplied alone (decode) or in a batch (batching never changes outputs).
float DotTileRow(TensorType type, const void* w_row, const TileOperand& a, int64_t n_pairs,
                 Int8Kernel kernel = ChosenInt8Kernel());
// y[t * y_stride + r] = DotTileRow(type, w + r * row_bytes, a[t], n_pairs) for r < rows,
// t < n_tokens, the same bits; each row is read once for all the tokens (decode of a few
// sequences) and the type is dispatched once per call, not per row.
// The avx512 kernel takes up to 16 tokens per decoded pair (two per register, prepared
// once per call in a register-wide layout), the others 4.
void DotTileRows(TensorType type, const void* w, int64_t row_bytes, int64_t rows,
                 const TileOperand* a, int n_tokens, int64_t n_pairs, float* y, int64_t y_stride,
                 Int8Kernel kernel = ChosenInt8Kernel());

}  // namespace tandem
