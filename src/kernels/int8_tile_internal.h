// Pieces the int8 tile files share; not part of the kernels' public API. The files:
//   int8_tile.cc          the kernel choice and the dispatch of the public entry points
//   int8_tile_layout.cc   tile positions and the prepared weight / activation rows
//   int8_tile_repack.cc   Q5_0 / Q4_0 -> Q5_0x2 / Q4_0x2 at load, and back
//   int8_tile_scalar.cc   the portable kernel
//   int8_tile_avx2.cc     the 256-bit kernels (AVX2, AVX-VNNI, and EVEX vpdpbusd)
//   int8_tile_avx512.cc   the AVX-512 VNNI kernels (two tokens per zmm)
// Each kernel file compiles its functions for their ISA with target attributes, so the
// library runs on any x86-64 CPU and the dispatch decides at run time.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/logging.h"
#include "common/tensor_type.h"
#include "kernels/dequant.h"
#include "kernels/int8_tile.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {

// How the 256-bit paths form int8 dot products: vpmaddubsw + vpmaddwd (plain AVX2), or
// vpdpbusd in its VEX (AVX-VNNI) or EVEX (AVX-512 VNNI + VL) encoding. The VNNI forms are
// written as inline assembly so that the functions keep their avx2 target: the compiler
// may not place VNNI (or EVEX) instructions anywhere else in them.
enum class VnniForm { kNone, kVex, kEvex };

// acc + per int32 lane the sum of 4 products of unsigned bytes u and signed bytes s.
template <VnniForm kForm>
__attribute__((target("avx2"))) inline __m256i DpBusd(__m256i acc, __m256i u, __m256i s) {
  if constexpr (kForm == VnniForm::kVex) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
  } else if constexpr (kForm == VnniForm::kEvex) {
    __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
    return acc;
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
}

// Pair p of 32-blocks of a stored Q8_0/Q5_0/Q4_0 row as the tile takes it: the values
// (Q8_0 as int8, Q5_0/Q4_0 as unsigned bytes) and the two fp16 scales.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) inline void DecodeWeightPair(const void* w_row, int64_t p,
                                                                      __m256i* w0, __m256i* w1,
                                                                      uint16_t* d0, uint16_t* d1) {
  if constexpr (kType == TensorType::kQ8_0) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(w_row) + 2 * p;
    *w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs));
    *w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs));
    *d0 = b[0].d;
    *d1 = b[1].d;
  } else if constexpr (kType == TensorType::kQ5_0) {
    const BlockQ5_0* b = static_cast<const BlockQ5_0*>(w_row) + 2 * p;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    *w0 =
        _mm256_or_si256(NibblesToBytes(b[0].qs), _mm256_and_si256(BytesFromBits32(b[0].qh), bit4));
    *w1 =
        _mm256_or_si256(NibblesToBytes(b[1].qs), _mm256_and_si256(BytesFromBits32(b[1].qh), bit4));
    *d0 = b[0].d;
    *d1 = b[1].d;
  } else if constexpr (kType == TensorType::kQ4_0) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w_row) + 2 * p;
    *w0 = NibblesToBytes(b[0].qs);
    *w1 = NibblesToBytes(b[1].qs);
    *d0 = b[0].d;
    *d1 = b[1].d;
  } else {  // Q5_0x2 / Q4_0x2: already in tile order (see BlockQ5_0x2)
    using Pair = std::conditional_t<kType == TensorType::kQ5_0x2, BlockQ5_0x2, BlockQ4_0x2>;
    const Pair* b = static_cast<const Pair*>(w_row) + p;
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
    *w0 = _mm256_and_si256(qs, low);
    *w1 = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low);
    if constexpr (kType == TensorType::kQ5_0x2) {
      int64_t bits;
      std::memcpy(&bits, b->qh, sizeof(bits));
      const __m256i qh = _mm256_set1_epi64x(bits);
      const __m256i bit4 = _mm256_set1_epi8(0x10);
      *w0 = _mm256_or_si256(
          *w0, _mm256_and_si256(_mm256_srlv_epi64(qh, _mm256_setr_epi64x(0, 1, 2, 3)), bit4));
      *w1 = _mm256_or_si256(
          *w1, _mm256_and_si256(_mm256_sllv_epi64(qh, _mm256_setr_epi64x(4, 3, 2, 1)), bit4));
    }
    *d0 = b->d[0];
    *d1 = b->d[1];
  }
}

// Q5_0x2 and Q4_0x2 pairs are stored in tile order; the file types are reordered.
template <TensorType kType>
constexpr bool kStoredInTileOrder = kType == TensorType::kQ5_0x2 || kType == TensorType::kQ4_0x2;

// Bytes of one pair of 32-blocks as stored.
template <TensorType kType>
constexpr int64_t kStoredPairBytes = kType == TensorType::kQ8_0     ? 2 * sizeof(BlockQ8_0)
                                     : kType == TensorType::kQ5_0   ? 2 * sizeof(BlockQ5_0)
                                     : kType == TensorType::kQ4_0   ? 2 * sizeof(BlockQ4_0)
                                     : kType == TensorType::kQ5_0x2 ? sizeof(BlockQ5_0x2)
                                                                    : sizeof(BlockQ4_0x2);

// [d0 d1 d0 d1 d0 d1 d0 d1] from two fp16 scales: one conversion, one permute.
__attribute__((target("avx2,fma,f16c"))) inline __m256 PairScaleLanes(uint16_t d0, uint16_t d1) {
  const __m128 both =
      _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d0 | (static_cast<uint32_t>(d1) << 16))));
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(both),
                                  _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1));
}

// Two blocks in natural order -> the pair's two 32-byte halves in tile order.
__attribute__((target("avx2"))) inline void ToTileOrder(__m256i* w0, __m256i* w1) {
  const __m256i lo = _mm256_unpacklo_epi32(*w0, *w1), hi = _mm256_unpackhi_epi32(*w0, *w1);
  *w0 = lo;
  *w1 = hi;
}

// Calls f with the tile type as a compile-time constant.
template <typename F>
decltype(auto) WithTileType(TensorType type, F&& f) {
  switch (type) {
    case TensorType::kQ8_0:
      return f(std::integral_constant<TensorType, TensorType::kQ8_0>{});
    case TensorType::kQ5_0:
      return f(std::integral_constant<TensorType, TensorType::kQ5_0>{});
    case TensorType::kQ4_0:
      return f(std::integral_constant<TensorType, TensorType::kQ4_0>{});
    case TensorType::kQ5_0x2:
      return f(std::integral_constant<TensorType, TensorType::kQ5_0x2>{});
    case TensorType::kQ4_0x2:
      return f(std::integral_constant<TensorType, TensorType::kQ4_0x2>{});
    default:
      TANDEM_CHECK(false) << "no int8 tile for type " << static_cast<int>(type);
      return f(std::integral_constant<TensorType, TensorType::kQ8_0>{});
  }
}

// Pair p of a Q5_0x2 / Q4_0x2 row: its 64 unsigned values in tile order and two scales
// (int8_tile_repack.cc). Precondition: type is kQ5_0x2 or kQ4_0x2.
void UnpackRepackedPair(TensorType type, const void* row, int64_t p, uint8_t tile[64], float d[2]);

// The 256-bit kernels (int8_tile_avx2.cc), in VNNI form `form`; the CPU runs AVX2, and
// AVX-VNNI (kVex) or the avx512 level (kEvex) where the form asks for it.
// DotInt8Tile4x2 (offset 0: signed Q8_0 weights).
void DotInt8Tile4x2Ymm(VnniForm form, int offset, const TileOperand w[4], const TileOperand a[2],
                       int64_t n_pairs, float out[4][2]);
// DotTileRow. Compiled for the kernels' target so the kernel inlines into it (one call per
// row); callers need not be.
__attribute__((target("avx2,fma,f16c"))) float DotTileRowYmm(VnniForm form, TensorType type,
                                                             const void* w_row,
                                                             const TileOperand& a,
                                                             int64_t n_pairs);
// DotTileRows (one token: the rows in interleaved runs, row_runs.h).
void DotTileRowsYmm(VnniForm form, TensorType type, const uint8_t* w, int64_t row_bytes,
                    int64_t rows, const TileOperand* a, int n_tokens, int64_t n_pairs, float* y,
                    int64_t y_stride);

// The AVX-512 VNNI kernels (int8_tile_avx512.cc), for a CPU at the avx512 level.
// DotTileRows for n_tokens != 1 (0: nothing).
void DotTileRowsAvx512(TensorType type, const uint8_t* w, int64_t row_bytes, int64_t rows,
                       const TileOperand* a, int n_tokens, int64_t n_pairs, float* y, int64_t y_stride);
// DotInt8Tile4x4 (offset 0: signed Q8_0 weights).
void DotInt8Tile4x4Avx512(int offset, const TileOperand w[4], const TileOperand a[4], int64_t n_pairs,
                          float out[4][4]);

}  // namespace tandem
