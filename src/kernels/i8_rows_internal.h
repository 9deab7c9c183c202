// Pieces the kI8Rows files share; not part of the kernels' public API (i8_rows.h). Files:
//   i8_rows.cc         the product's driver (token and row blocks, K slices), the
//                      dispatch, the activation sums, DequantizeI8Row
//   i8_rows_scalar.cc  the portable dots, quantizer and epilogue
//   i8_rows_avx2.cc    the 256-bit dots (AVX2 vpmaddwd; AVX-VNNI vpdpbusd), the AVX2
//                      quantizer (every vector level's) and epilogue
//   i8_rows_avx512.cc  the AVX-512 VNNI dots and epilogue
// Each vector file compiles its functions for their ISA with target attributes, so the
// library runs on any x86-64 CPU and the dispatch decides at run time. Every file is
// built with -ffp-contract=off (kernels/CMakeLists.txt): a multiply and an add must not
// fuse in one ISA's epilogue and not in another's.
#pragma once

#include <cstdint>

#include "kernels/int8_tile_internal.h"

namespace tandem {

// The exact integer dots of a block of weight rows and tokens over one K slice:
// dots[t * dots_stride + i] = sum_{k < cols} w_i[k] * (u_t[k] - 128) for i < n_rows,
// t < n_tokens, where w_i = w + i * row_bytes (no byte at or past w_i + cols is read) and
// u_t = x + t * x_stride (activations + 128; any bytes from cols up to cols rounded up
// to 64, where the kernels meet zero weights). runs: rows in kDecodeRuns interleaved
// runs (row_runs.h: one token streaming its matrix).
// Preconditions: cols <= kI8MaxExactCols.
struct I8DotArgs {
  const int8_t* w = nullptr;
  int64_t row_bytes = 0;
  int64_t n_rows = 0;
  const uint8_t* x = nullptr;
  int64_t x_stride = 0;
  int64_t n_tokens = 0;
  int64_t cols = 0;
  int32_t* dots = nullptr;
  int64_t dots_stride = 0;
  bool runs = false;
};

// Step 3 of i8_rows.h for one token and n rows: y[i] from dots[i] and the rows'
// parameters (each pointer already at the block's first row; offset and bias may be
// null). Plain C++ on purpose: each ISA's wrapper (I8Finish*) inlines it and the compiler
// vectorizes it lane by lane, which gives the scalar loop's bits.
struct I8FinishArgs {
  const int32_t* dots = nullptr;
  int64_t n = 0;
  const float* scale = nullptr;
  const float* offset = nullptr;
  const int32_t* bias = nullptr;
  bool is_static = false;
  float s_t = 0;    // dynamic
  int32_t sum = 0;  // dynamic with offsets: sum of the token's xq
  float* y = nullptr;
};

inline __attribute__((always_inline)) void I8FinishRows(const I8FinishArgs& a) {
  const int32_t* __restrict dots = a.dots;
  const float* __restrict scale = a.scale;
  float* __restrict y = a.y;
  const int64_t n = a.n;
  if (a.is_static) {
    if (a.bias == nullptr) {
      for (int64_t i = 0; i < n; ++i) y[i] = scale[i] * static_cast<float>(dots[i]);
      return;
    }
    const int32_t* __restrict bias = a.bias;
    for (int64_t i = 0; i < n; ++i) {
      // int32, wrapping (exact while |dot + bias| < 2^31)
      const auto sum =
          static_cast<int32_t>(static_cast<uint32_t>(dots[i]) + static_cast<uint32_t>(bias[i]));
      y[i] = scale[i] * static_cast<float>(sum);
    }
    return;
  }
  const float s_t = a.s_t;
  if (a.offset == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = s_t * (scale[i] * static_cast<float>(dots[i]));
    return;
  }
  const float* __restrict offset = a.offset;
  const float sum = static_cast<float>(a.sum);
  for (int64_t i = 0; i < n; ++i) {
    const float centred = static_cast<float>(dots[i]) - offset[i] * sum;
    y[i] = s_t * (scale[i] * centred);
  }
}

// q8 of i8_rows.h for one value: nearbyint, then the clamp written as the vector paths'
// max / min (a NaN compares false and becomes -128, as _mm256_max_ps(v, -128) gives it).
inline int8_t RoundToInt8(float v) {
  float r = __builtin_nearbyintf(v);
  r = r > -128.0f ? r : -128.0f;
  r = r < 127.0f ? r : 127.0f;
  return static_cast<int8_t>(static_cast<int32_t>(r));
}

// Row groups of kRows rows of a block of n_rows (> 0): fn(rows, valid) with rows[kRows]
// the group's row indices, the first `valid` distinct and the rest repeating the last
// (their dots are computed and dropped). With runs, group i of the first n_rows / kRows
// takes row i of each of kRows equal runs (row_runs.h), the rest follow in order.
template <int kRows, typename Fn>
inline void ForEachRowGroup(int64_t n_rows, bool runs, Fn&& fn) {
  int64_t rows[kRows];
  int64_t done = 0;
  if (runs) {
    const int64_t part = n_rows / kRows;
    for (int64_t i = 0; i < part; ++i) {
      for (int j = 0; j < kRows; ++j) rows[j] = j * part + i;
      fn(rows, kRows);
    }
    done = kRows * part;
  }
  for (; done < n_rows; done += kRows) {
    const int valid = static_cast<int>(n_rows - done < kRows ? n_rows - done : kRows);
    for (int j = 0; j < kRows; ++j) rows[j] = done + (j < valid ? j : valid - 1);
    fn(rows, valid);
  }
}

// The kernels. Dots: I8DotArgs above. Finish: I8FinishRows. Quantize: one activation row
// (i8_rows.h QuantizeI8Activations, without the sum).
void I8DotsScalar(const I8DotArgs& a);
void I8FinishScalar(const I8FinishArgs& a);
void QuantizeI8RowScalar(const float* x, int64_t cols, float act_scale, float act_offset,
                         uint8_t* u, float* s_t);

// form kNone: AVX2 vpmaddwd; kVex: AVX-VNNI; kEvex: the avx512 level's ymm form.
void I8DotsYmm(VnniForm form, const I8DotArgs& a);
void I8FinishAvx2(const I8FinishArgs& a);
void QuantizeI8RowAvx2(const float* x, int64_t cols, float act_scale, float act_offset, uint8_t* u,
                       float* s_t);

void I8DotsAvx512(const I8DotArgs& a);
void I8FinishAvx512(const I8FinishArgs& a);

}  // namespace tandem
