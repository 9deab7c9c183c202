// The int8 tile kernels at the avx512 level (AVX-512 F/BW/VL/VNNI): two tokens per zmm
// register, one in each 256-bit half; see int8_tile.h. Same bits as the 256-bit kernels
// of int8_tile_avx2.cc.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "kernels/int8_tile.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/quant_dot_internal.h"
#include "kernels/row_runs.h"

namespace tandem {

// ---- AVX-512 VNNI: two tokens per zmm register, one in each 256-bit half ----
//
// Each half takes, lane by lane, the float steps of the 256-bit paths (scale = weight
// lanes x activation lanes, one fused multiply-add of the lane's integer sum, the same
// horizontal sum at the end), so a token's result does not depend on the half, the
// register or the kernel it went through.
namespace {

// Pair p of a prepared tile weight row broadcast to both halves of the registers: the
// values (Q8_0: magnitudes), the scale lanes and, for Q8_0, the masks of the negative
// values (stored after the magnitudes).
template <bool kSigned>
struct TilePairZmm {
  __m512i w0, w1;
  __m512 dw;
  __mmask64 neg0 = 0, neg1 = 0;
  __attribute__((target(TANDEM_AVX512_TARGET))) TilePairZmm(const TileOperand& w, int64_t p) {
    const uint8_t* pair = static_cast<const uint8_t*>(w.q) + (kSigned ? 128 : 64) * p;
    w0 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)));
    w1 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32)));
    dw = BothHalves(_mm256_loadu_ps(w.d_lanes + 8 * p));
    if constexpr (kSigned) {
      neg0 = _mm512_movepi8_mask(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 64))));
      neg1 = _mm512_movepi8_mask(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 96))));
    }
  }
};

// DotInt8Tile4x2Avx2's arithmetic for 4 rows x 4 tokens: tokens (0, 1) and (2, 3) share
// registers; each weight pair is broadcast to both halves.
template <bool kSigned>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotInt8Tile4x4Avx512(const TileOperand w[4],
                                                                        const TileOperand a[4],
                                                                        int64_t n_pairs,
                                                                        float out[4][4]) {
  __m512 acc[4][2];
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int8_t* aq[4];
  for (int t = 0; t < 4; ++t) aq[t] = static_cast<const int8_t*>(a[t].q);
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < n_pairs; ++p) {
    __m512i x0[2], x1[2], corr[2];
    __m512 da[2];
    for (int h = 0; h < 2; ++h) {
      x0[h] = JoinHalves(aq[2 * h] + 64 * p, aq[2 * h + 1] + 64 * p);
      x1[h] = JoinHalves(aq[2 * h] + 64 * p + 32, aq[2 * h + 1] + 64 * p + 32);
      da[h] = JoinHalves(a[2 * h].d_lanes + 8 * p, a[2 * h + 1].d_lanes + 8 * p);
      if constexpr (!kSigned) {  // negated: the sums start from -corr
        corr[h] = _mm512_sub_epi32(zero, JoinHalves(a[2 * h].corr + 8 * p, a[2 * h + 1].corr + 8 * p));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const TilePairZmm<kSigned> wp(w[r], p);
      const __m512i w0 = wp.w0, w1 = wp.w1;
      const __m512 dw = wp.dw;
      const __mmask64 neg0 = wp.neg0, neg1 = wp.neg1;
      for (int h = 0; h < 2; ++h) {
        __m512i s;
        if constexpr (kSigned) {
          s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, w0, NegateWhere(neg0, x0[h])), w1,
                                  NegateWhere(neg1, x1[h]));
        } else {
          s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr[h], w0, x0[h]), w1, x1[h]);
        }
        acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da[h]), _mm512_cvtepi32_ps(s), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    HalfSums(acc[r][0], &out[r][0], &out[r][1]);
    HalfSums(acc[r][1], &out[r][2], &out[r][3]);
  }
}

// The row path's tokens laid out for zmm registers, once per call: per weight pair p and
// token pair h (index p * n_token_pairs + h) 128 activation bytes [t0 x0 | t1 x0 | t0 x1
// | t1 x1] (the pair's two 32-byte halves of tokens 2h and 2h + 1), their 16 scale lanes
// [t0 | t1], and for unsigned weights the negated corrections [-c0 | -c1], so each load
// is one full register. For Q8_0 (signed weights) the activations are stored + 128
// (x ^ 0x80, unsigned) and the weights are the signed operand of vpdpbusd: the sum then
// carries 128 * (sum of the lane's weights), taken back out per weight pair (shared by
// all tokens), instead of flipping signs per token. Same integers.
// DotTileRowGroupAvx2's arithmetic for kRows weight rows (1 or 2, `row_bytes` apart) and
// kPairs token pairs (tokens 2h, 2h + 1 of `paired` in register h): each weight pair is
// decoded once, as PrepareTileWeightRow would, for all of them, and each token pair's
// activations are loaded once for the rows (with many tokens the activations come from L2,
// so two rows halve that traffic). out[r][k]: row r, token 2 * h0 + k.
template <TensorType kType, int kRows, int kPairs>
__attribute__((target(TANDEM_AVX512_TARGET))) inline void DotTileRowPairsAvx512(
    const uint8_t* w_row, int64_t row_bytes, const PairedTileTokens& paired, int h0, int64_t n_pairs,
    float out[][16]) {
  constexpr bool kSigned = kType == TensorType::kQ8_0;
  __m512 acc[kRows][kPairs];
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kPairs; ++h) acc[r][h] = _mm512_setzero_ps();
  constexpr int64_t kPairBytes = kStoredPairBytes<kType>;
  constexpr int64_t kPrefetchBytes = 1536;  // as in DotTileRowGroupAvx2
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = 0; p < n_pairs; ++p) {
    __m512i w0[kRows], w1[kRows], start[kRows];
    __m512 dw[kRows];
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* row = w_row + r * row_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(row) + kPrefetchBytes + p * kPairBytes, _MM_HINT_T0);
      __m256i v0, v1;
      uint16_t d0, d1;
      DecodeWeightPair<kType>(row, p, &v0, &v1, &d0, &d1);
      if constexpr (!kStoredInTileOrder<kType>) ToTileOrder(&v0, &v1);
      dw[r] = BothHalves(PairScaleLanes(d0, d1));
      w0[r] = _mm512_broadcast_i64x4(v0);
      w1[r] = _mm512_broadcast_i64x4(v1);
      start[r] = _mm512_setzero_si512();
      if constexpr (kSigned) {  // -128 * (sum of each lane's 8 weights)
        start[r] = _mm512_sub_epi32(
            start[r], _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start[r], flip, w0[r]), flip, w1[r]));
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < kPairs; ++h) {
      const int64_t slot = (h0 + h) * n_pairs + p;
      const uint8_t* x = paired.x.data() + slot * 128;
      const __m512i x0 = _mm512_loadu_si512(x), x1 = _mm512_loadu_si512(x + 64);
      const __m512 da = _mm512_loadu_ps(paired.d.data() + slot * 16);
      __m512i c = _mm512_setzero_si512();
      if constexpr (!kSigned) c = _mm512_loadu_si512(paired.neg_corr.data() + slot * 16);
      for (int r = 0; r < kRows; ++r) {
        __m512i sum;
        if constexpr (kSigned) {
          sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start[r], x0, w0[r]), x1, w1[r]);
        } else {
          sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, w0[r], x0), w1[r], x1);
        }
        acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), _mm512_cvtepi32_ps(sum), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kPairs; ++h) HalfSums(acc[r][h], &out[r][2 * h], &out[r][2 * h + 1]);
}

// kRows rows (1 or 2) from `row` against every token, up to 16 tokens per decoded weight pair.
template <TensorType kType, int kRows>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotTileRowBlockAvx512(
    const uint8_t* row, int64_t row_bytes, const PairedTileTokens& paired, int n_tokens, int64_t n_pairs,
    float* y, int64_t y_stride) {
  const int n_tp = (n_tokens + 1) / 2;
  constexpr int kMaxPairs = 8;
  float out[kRows][16];
  for (int h0 = 0; h0 < n_tp; h0 += kMaxPairs) {
    const int np = std::min(kMaxPairs, n_tp - h0);
    switch (np) {
#define TANDEM_ROW_PAIRS_CASE(N)                                                        \
  case N:                                                                              \
    DotTileRowPairsAvx512<kType, kRows, N>(row, row_bytes, paired, h0, n_pairs, out);  \
    break;
      TANDEM_ROW_PAIRS_CASE(1)
      TANDEM_ROW_PAIRS_CASE(2)
      TANDEM_ROW_PAIRS_CASE(3)
      TANDEM_ROW_PAIRS_CASE(4)
      TANDEM_ROW_PAIRS_CASE(5)
      TANDEM_ROW_PAIRS_CASE(6)
      TANDEM_ROW_PAIRS_CASE(7)
      TANDEM_ROW_PAIRS_CASE(8)
#undef TANDEM_ROW_PAIRS_CASE
      default:
        break;
    }
    const int t0 = 2 * h0;
    for (int r = 0; r < kRows; ++r) {
      for (int k = 0; k < 2 * np && t0 + k < n_tokens; ++k) y[(t0 + k) * y_stride + r] = out[r][k];
    }
  }
}

// Rows outer (two at a time), tokens inner, up to 16 tokens per decoded weight pair (two
// or more tokens; one alone takes the 256-bit path, see DotTileRows).
template <TensorType kType>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotTileRowsAvx512(
    const uint8_t* w, int64_t row_bytes, int64_t rows, const TileOperand* a, int n_tokens,
    int64_t n_pairs, float* y, int64_t y_stride) {
  thread_local PairedTileTokens paired;
  PairTileTokens(a, n_tokens, n_pairs, kType == TensorType::kQ8_0, &paired);
  ForEachRowInRuns(n_tokens, 0, rows / 2, [&](int64_t pair) {  // row pairs in interleaved runs (row_runs.h)
    const int64_t r = 2 * pair;
    DotTileRowBlockAvx512<kType, 2>(w + r * row_bytes, row_bytes, paired, n_tokens, n_pairs, y + r, y_stride);
  });
  if (rows % 2 != 0) {
    const int64_t r = rows - 1;
    DotTileRowBlockAvx512<kType, 1>(w + r * row_bytes, row_bytes, paired, n_tokens, n_pairs, y + r, y_stride);
  }
}

}  // namespace

namespace {

// DotInt8Tile4x4Avx512 on paired tokens: 4 weight rows x kTP token pairs, every activation
// operand one full-register load (most fold into the instructions that use them).
template <bool kSigned, int kTP>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotInt8TilePairedAvx512(
    const TileOperand w[4], const PairedTileTokens& t, int h0, float* out) {
  const int64_t n_pairs = t.n_pairs;
  __m512 acc[4][kTP];
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < kTP; ++h) acc[r][h] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t p = 0; p < n_pairs; ++p) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const TilePairZmm<kSigned> wp(w[r], p);
      const __m512i w0 = wp.w0, w1 = wp.w1;
      const __m512 dw = wp.dw;
      const __mmask64 neg0 = wp.neg0, neg1 = wp.neg1;
#pragma GCC unroll 4
      for (int h = 0; h < kTP; ++h) {
        const int64_t slot = (h0 + h) * n_pairs + p;
        const uint8_t* x = t.x.data() + slot * 128;
        __m512i s;
        if constexpr (kSigned) {
          s = _mm512_dpbusd_epi32(
              _mm512_dpbusd_epi32(zero, w0, NegateWhere(neg0, _mm512_loadu_si512(x))), w1,
              NegateWhere(neg1, _mm512_loadu_si512(x + 64)));
        } else {
          s = _mm512_dpbusd_epi32(
              _mm512_dpbusd_epi32(_mm512_loadu_si512(t.neg_corr.data() + slot * 16), w0,
                                  _mm512_loadu_si512(x)),
              w1, _mm512_loadu_si512(x + 64));
        }
        acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_loadu_ps(t.d.data() + slot * 16)),
                                    _mm512_cvtepi32_ps(s), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < kTP; ++h) HalfSums(acc[r][h], &out[r * 8 + 2 * h], &out[r * 8 + 2 * h + 1]);
}

}  // namespace

void PairTileTokens(const TileOperand* a, int n_tokens, int64_t n_pairs, bool flip_signs,
                    PairedTileTokens* out) {
  const int n_tp = (n_tokens + 1) / 2;
  out->n_pairs = n_pairs;
  out->n_token_pairs = n_tp;
  out->x.resize(static_cast<size_t>(n_pairs * n_tp * 128));
  out->d.resize(static_cast<size_t>(n_pairs * n_tp * 16));
  out->neg_corr.resize(static_cast<size_t>(n_pairs * n_tp * 16));
  for (int h = 0; h < n_tp; ++h) {
    const TileOperand* t[2] = {&a[2 * h], &a[std::min(2 * h + 1, n_tokens - 1)]};
    for (int64_t p = 0; p < n_pairs; ++p) {
      const int64_t slot = h * n_pairs + p;
      uint8_t* x = out->x.data() + slot * 128;
      for (int k = 0; k < 2; ++k) {
        const uint8_t* q = static_cast<const uint8_t*>(t[k]->q) + 64 * p;
        for (int half = 0; half < 2; ++half) {
          uint8_t* dst = x + 64 * half + 32 * k;
          std::memcpy(dst, q + 32 * half, 32);
          if (flip_signs) {
            for (int i = 0; i < 32; ++i) dst[i] ^= 0x80;
          }
        }
        std::memcpy(out->d.data() + slot * 16 + 8 * k, t[k]->d_lanes + 8 * p, 8 * sizeof(float));
        for (int j = 0; j < 8; ++j) {
          out->neg_corr[slot * 16 + 8 * k + j] = t[k]->corr != nullptr ? -t[k]->corr[8 * p + j] : 0;
        }
      }
    }
  }
}

void DotInt8TilePaired(int offset, const TileOperand w[4], const PairedTileTokens& t, int h0,
                       int n_h, float out[4][8]) {
  float* o = &out[0][0];
  switch (n_h) {
#define TANDEM_TILE_PAIRS_CASE(N)                                                              \
  case N:                                                                                      \
    return offset == 0 ? DotInt8TilePairedAvx512<true, N>(w, t, h0, o)                         \
                       : DotInt8TilePairedAvx512<false, N>(w, t, h0, o);
    TANDEM_TILE_PAIRS_CASE(1)
    TANDEM_TILE_PAIRS_CASE(2)
    TANDEM_TILE_PAIRS_CASE(3)
    TANDEM_TILE_PAIRS_CASE(4)
#undef TANDEM_TILE_PAIRS_CASE
    default:
      TANDEM_CHECK(false) << "token pairs per tile call: " << n_h;
  }
}

void DotTileRowsAvx512(TensorType type, const uint8_t* w, int64_t row_bytes, int64_t rows,
                       const TileOperand* a, int n_tokens, int64_t n_pairs, float* y, int64_t y_stride) {
  WithTileType(type, [&](auto t) {
    DotTileRowsAvx512<decltype(t)::value>(w, row_bytes, rows, a, n_tokens, n_pairs, y, y_stride);
  });
}

void DotInt8Tile4x4Avx512(int offset, const TileOperand w[4], const TileOperand a[4], int64_t n_pairs,
                          float out[4][4]) {
  return offset == 0 ? DotInt8Tile4x4Avx512<true>(w, a, n_pairs, out)
                     : DotInt8Tile4x4Avx512<false>(w, a, n_pairs, out);
}

}  // namespace tandem
