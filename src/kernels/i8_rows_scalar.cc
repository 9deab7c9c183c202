// The portable kI8Rows kernels (i8_rows.h): the reference the vector files match bit for
// bit, and the path where the CPU has no AVX2.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/i8_rows.h"
#include "kernels/i8_rows_internal.h"

namespace tandem {

void I8DotsScalar(const I8DotArgs& a) {
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const uint8_t* u = a.x + t * a.x_stride;
    for (int64_t i = 0; i < a.n_rows; ++i) {
      const int8_t* w = a.w + i * a.row_bytes;
      int32_t dot = 0;  // exact: cols <= kI8MaxExactCols
      for (int64_t k = 0; k < a.cols; ++k)
        dot += static_cast<int32_t>(w[k]) * (static_cast<int32_t>(u[k]) - 128);
      a.dots[t * a.dots_stride + i] = dot;
    }
  }
}

void I8FinishScalar(const I8FinishArgs& a) { I8FinishRows(a); }

void QuantizeI8RowScalar(const float* x, int64_t cols, float act_scale, float act_offset,
                         uint8_t* u, float* s_t) {
  std::memset(u + cols, 128, static_cast<size_t>(I8RowStride(cols) - cols));
  auto store = [&](int64_t k, float v) { u[k] = static_cast<uint8_t>(RoundToInt8(v) ^ 0x80); };
  if (act_scale > 0) {
    *s_t = 0;
    for (int64_t k = 0; k < cols; ++k) store(k, x[k] / act_scale + act_offset);
    return;
  }
  float amax = 0;
  for (int64_t k = 0; k < cols; ++k) {
    const float v = std::fabs(x[k]);
    amax = v > amax ? v : amax;  // _mm256_max_ps(v, amax): a NaN is passed over
  }
  *s_t = amax / 127.0f;
  if (amax == 0) {
    std::memset(u, 128, static_cast<size_t>(cols));
    return;
  }
  const float inv = 127.0f / amax;
  for (int64_t k = 0; k < cols; ++k) store(k, x[k] * inv);
}

}  // namespace tandem
