// The int8 tile's portable kernel (int8_tile.h DotInt8Tile4x2Scalar): the vector
// kernels' integers and float steps lane by lane, so it gives their bits.
#include <cmath>
#include <cstdint>

#include "kernels/int8_tile.h"

namespace tandem {

namespace {

// The vector path's arithmetic lane by lane (same integers, same fused multiply-adds,
// same horizontal sum), so the two paths give the same bits.
float TileLanesSum(const float acc[8]) {
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = acc[j] + acc[j + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
}

}  // namespace

void DotInt8Tile4x2Scalar(int offset, const TileOperand w[4], const TileOperand a[2],
                          int64_t n_pairs, float out[4][2]) {
  for (int r = 0; r < 4; ++r) {
    const uint8_t* wq = static_cast<const uint8_t*>(w[r].q);
    for (int t = 0; t < 2; ++t) {
      const int8_t* aq = static_cast<const int8_t*>(a[t].q);
      float acc[8] = {};
      for (int64_t p = 0; p < n_pairs; ++p) {
        for (int j = 0; j < 8; ++j) {
          int32_t isum = 0;
          for (int half = 0; half < 2; ++half) {
            for (int k = 0; k < 4; ++k) {
              const int64_t pos = 64 * p + 32 * half + 4 * j + k;
              // Unsigned weights as stored; their offset leaves through the corrections.
              const int wv = offset == 0 ? static_cast<int8_t>(wq[pos + 64 * p + 64]) : wq[pos];
              isum += wv * aq[pos];
            }
          }
          const int64_t lane = 8 * p + j;
          if (offset != 0) isum -= a[t].corr[lane];
          acc[j] =
              std::fma(w[r].d_lanes[lane] * a[t].d_lanes[lane], static_cast<float>(isum), acc[j]);
        }
      }
      out[r][t] = TileLanesSum(acc);
    }
  }
}

}  // namespace tandem
