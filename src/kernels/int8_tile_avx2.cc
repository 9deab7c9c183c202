// The int8 tile kernels on 256-bit registers (AVX2, with vpdpbusd in its VEX form on
// AVX-VNNI CPUs and its EVEX form at the avx512 level's one-token rows); see int8_tile.h.
// Same bits as the scalar kernel (int8_tile_scalar.cc) and the AVX-512 ones
// (int8_tile_avx512.cc).
#include <immintrin.h>

#include <cstdint>

#include "common/logging.h"
#include "kernels/int8_tile.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/quant_dot_internal.h"
#include "kernels/row_runs.h"

namespace tandem {

namespace {

// One pair of 32-blocks (tile order) of one weight row against one token: int32 lane j
// is the exact sum of 8 products of block j % 2 (unsigned weights' offset taken back out
// by `corr`). The tile and DotTileRow both use it, so they agree bit for bit. For
// unsigned weights (<= 31) two products-of-pairs fit int16 (4 * 31 * 127 < 2^15), so the
// halves are added before `vpmaddwd`; signed ones (up to 2 * 128 * 127 each) are not.
// No int16 sum saturates, so vpdpbusd gives the same integers.
template <bool kSigned, VnniForm kForm = VnniForm::kNone>
__attribute__((target("avx2,fma"))) inline __m256i PairSums(__m256i w0, __m256i w1, __m256i x0,
                                                            __m256i x1, const int32_t* corr) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kSigned) {
    if constexpr (kForm != VnniForm::kNone) {
      const __m256i h = DpBusd<kForm>(_mm256_setzero_si256(), _mm256_sign_epi8(w0, w0),
                                      _mm256_sign_epi8(x0, w0));
      return DpBusd<kForm>(h, _mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    }
    const __m256i m0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
    const __m256i m1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    return _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
  } else {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr));
    if constexpr (kForm != VnniForm::kNone) {
      return _mm256_sub_epi32(
          DpBusd<kForm>(DpBusd<kForm>(_mm256_setzero_si256(), w0, x0), w1, x1), c);
    }
    const __m256i m = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1));
    return _mm256_sub_epi32(_mm256_madd_epi16(m, ones), c);
  }
}

// PairSums<true> with the weights' magnitudes |w| given (the tile stores them), so only
// the activations' sign flip is left per token. Same integers.
template <VnniForm kForm = VnniForm::kNone>
__attribute__((target("avx2,fma"))) inline __m256i SignedPairSums(__m256i abs0, __m256i abs1,
                                                                  __m256i w0, __m256i w1,
                                                                  __m256i x0, __m256i x1) {
  if constexpr (kForm != VnniForm::kNone) {
    return DpBusd<kForm>(DpBusd<kForm>(_mm256_setzero_si256(), abs0, _mm256_sign_epi8(x0, w0)),
                         abs1, _mm256_sign_epi8(x1, w1));
  }
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i m0 = _mm256_maddubs_epi16(abs0, _mm256_sign_epi8(x0, w0));
  const __m256i m1 = _mm256_maddubs_epi16(abs1, _mm256_sign_epi8(x1, w1));
  return _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
}

template <bool kSigned, VnniForm kForm>
__attribute__((target("avx2,fma"))) void DotInt8Tile4x2Avx2(const TileOperand w[4],
                                                            const TileOperand a[2], int64_t n_pairs,
                                                            float out[4][2]) {
  __m256 acc[4][2];
  for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const uint8_t* wq[4];
  const float* wd[4];
  for (int r = 0; r < 4; ++r) {
    wq[r] = static_cast<const uint8_t*>(w[r].q);
    wd[r] = w[r].d_lanes;
  }
  for (int64_t p = 0; p < n_pairs; ++p) {
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q) + 64 * p;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32));
      const __m256 da = _mm256_loadu_ps(a[t].d_lanes + 8 * p);
      for (int r = 0; r < 4; ++r) {
        const uint8_t* pair = wq[r] + (kSigned ? 128 : 64) * p;
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32));
        __m256i h;
        if constexpr (kSigned) {
          h = SignedPairSums<kForm>(
              w0, w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 64)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 96)), x0, x1);
        } else {
          h = PairSums<false, kForm>(w0, w1, x0, x1, a[t].corr + 8 * p);
        }
        const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(wd[r] + 8 * p), da);
        acc[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(h), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    out[r][0] = HorizontalSum(acc[r][0]);
    out[r][1] = HorizontalSum(acc[r][1]);
  }
}

// DotTileRow's vector path for kGroup tokens at once: each pair of weight blocks is decoded
// as PrepareTileWeightRow would, once for all of them, then every token's lanes take
// exactly the tile's per-lane steps, in the same order, so a token's result does not
// depend on the group it is in. Decode streams the weights once from DRAM; the hardware
// prefetcher alone leaves one core at ~80% of its read bandwidth (kernels_bench lm_head
// GEMV), so each pair also asks for the line kPrefetchBytes ahead (past this row: the
// next rows of the matrix).
template <TensorType kType, int kGroup, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline void DotTileRowGroupAvx2(const void* w_row,
                                                                        const TileOperand* a,
                                                                        int64_t n_pairs, float* out) {
  __m256 acc[kGroup];
  for (int t = 0; t < kGroup; ++t) acc[t] = _mm256_setzero_ps();
  constexpr int64_t kPairBytes = kStoredPairBytes<kType>;
  constexpr int64_t kPrefetchBytes = 1536;
  const char* ahead = static_cast<const char*>(w_row) + kPrefetchBytes;
  for (int64_t p = 0; p < n_pairs; ++p) {
    _mm_prefetch(ahead + p * kPairBytes, _MM_HINT_T0);
    __m256i w0, w1;
    uint16_t d0, d1;
    DecodeWeightPair<kType>(w_row, p, &w0, &w1, &d0, &d1);
    if constexpr (!kStoredInTileOrder<kType>) ToTileOrder(&w0, &w1);
    const __m256 wd = PairScaleLanes(d0, d1);
    for (int t = 0; t < kGroup; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 64 * p + 32));
      const __m256i h =
          PairSums<kType == TensorType::kQ8_0, kForm>(w0, w1, x0, x1, a[t].corr + 8 * p);
      const __m256 scale = _mm256_mul_ps(wd, _mm256_loadu_ps(a[t].d_lanes + 8 * p));
      acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(h), acc[t]);
    }
  }
  for (int t = 0; t < kGroup; ++t) out[t] = HorizontalSum(acc[t]);
}

template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline float DotTileRowAvx2(const void* w_row,
                                                                     const TileOperand& a,
                                                                     int64_t n_pairs) {
  float out;
  DotTileRowGroupAvx2<kType, 1, kForm>(w_row, &a, n_pairs, &out);
  return out;
}

// Rows outer, tokens inner: a row read from DRAM once serves every token (from L1),
// decoded once per group of up to four tokens.
template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) void DotTileRowsAvx2(const uint8_t* w, int64_t row_bytes,
                                                              int64_t rows, const TileOperand* a,
                                                              int n_tokens, int64_t n_pairs,
                                                              float* y, int64_t y_stride) {
  ForEachRowInRuns(n_tokens, 0, rows, [&](int64_t r) {  // interleaved runs (row_runs.h)
    const uint8_t* row = w + r * row_bytes;
    float out[4];
    int t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      DotTileRowGroupAvx2<kType, 4, kForm>(row, a + t, n_pairs, out);
      for (int k = 0; k < 4; ++k) y[(t + k) * y_stride + r] = out[k];
    }
    switch (n_tokens - t) {
      case 3:
        DotTileRowGroupAvx2<kType, 3, kForm>(row, a + t, n_pairs, out);
        break;
      case 2:
        DotTileRowGroupAvx2<kType, 2, kForm>(row, a + t, n_pairs, out);
        break;
      case 1:
        out[0] = DotTileRowAvx2<kType, kForm>(row, a[t], n_pairs);
        break;
      default:
        break;
    }
    for (int k = 0; t + k < n_tokens; ++k) y[(t + k) * y_stride + r] = out[k];
  });
}

// Calls f with the VNNI form as a compile-time constant.
template <typename F>
decltype(auto) WithVnniForm(VnniForm form, F&& f) {
  switch (form) {
    case VnniForm::kEvex:
      return f(std::integral_constant<VnniForm, VnniForm::kEvex>{});
    case VnniForm::kVex:
      return f(std::integral_constant<VnniForm, VnniForm::kVex>{});
    default:
      return f(std::integral_constant<VnniForm, VnniForm::kNone>{});
  }
}

}  // namespace

void DotInt8Tile4x2Ymm(VnniForm form, int offset, const TileOperand w[4], const TileOperand a[2],
                       int64_t n_pairs, float out[4][2]) {
  WithVnniForm(form, [&](auto f) {
    constexpr VnniForm kForm = decltype(f)::value;
    return offset == 0 ? DotInt8Tile4x2Avx2<true, kForm>(w, a, n_pairs, out)
                       : DotInt8Tile4x2Avx2<false, kForm>(w, a, n_pairs, out);
  });
}

namespace {

// The one-row entry point is called once per row (the tests, kernels_bench's DotTileRow),
// so it switches without lambdas and carries the kernels' target: the kernel inlines into
// it and a row costs one call, as when the dispatch called the kernel itself.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) inline float DotTileRowOfType(VnniForm form,
                                                                       const void* w_row,
                                                                       const TileOperand& a,
                                                                       int64_t n_pairs) {
  switch (form) {
    case VnniForm::kEvex:
      return DotTileRowAvx2<kType, VnniForm::kEvex>(w_row, a, n_pairs);
    case VnniForm::kVex:
      return DotTileRowAvx2<kType, VnniForm::kVex>(w_row, a, n_pairs);
    default:
      return DotTileRowAvx2<kType, VnniForm::kNone>(w_row, a, n_pairs);
  }
}

}  // namespace

__attribute__((target("avx2,fma,f16c"))) float DotTileRowYmm(VnniForm form, TensorType type,
                                                             const void* w_row,
                                                             const TileOperand& a,
                                                             int64_t n_pairs) {
  switch (type) {
    case TensorType::kQ8_0:
      return DotTileRowOfType<TensorType::kQ8_0>(form, w_row, a, n_pairs);
    case TensorType::kQ5_0:
      return DotTileRowOfType<TensorType::kQ5_0>(form, w_row, a, n_pairs);
    case TensorType::kQ4_0:
      return DotTileRowOfType<TensorType::kQ4_0>(form, w_row, a, n_pairs);
    case TensorType::kQ5_0x2:
      return DotTileRowOfType<TensorType::kQ5_0x2>(form, w_row, a, n_pairs);
    case TensorType::kQ4_0x2:
      return DotTileRowOfType<TensorType::kQ4_0x2>(form, w_row, a, n_pairs);
    default:
      TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
      return 0.0f;
  }
}

void DotTileRowsYmm(VnniForm form, TensorType type, const uint8_t* w, int64_t row_bytes,
                    int64_t rows, const TileOperand* a, int n_tokens, int64_t n_pairs, float* y,
                    int64_t y_stride) {
  WithTileType(type, [&](auto t) {
    constexpr TensorType kType = decltype(t)::value;
    WithVnniForm(form, [&](auto f) {
      constexpr VnniForm kForm = decltype(f)::value;
      if (n_tokens == 1) {  // decode: the rows in interleaved runs (row_runs.h)
        ForEachRowInRuns(1, 0, rows, [&](int64_t r) {
          y[r] = DotTileRowAvx2<kType, kForm>(w + r * row_bytes, a[0], n_pairs);
        });
        return;
      }
      DotTileRowsAvx2<kType, kForm>(w, row_bytes, rows, a, n_tokens, n_pairs, y, y_stride);
    });
  });
}

}  // namespace tandem
