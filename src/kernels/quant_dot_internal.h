// Pieces shared by the quant_dot*.cc files (not part of the kernels' public API).
#pragma once

#include <cstdint>

#include "common/tensor_type.h"

namespace tandem {

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (shared with dequant.cc).
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Scalar dots for Q4_1, Q5_1 (Q8_1 activations) and Q2_K, Q3_K, Q5_K (Q8_K).
float VecDotGeneric(TensorType type, const void* w_row, const void* a_row, int64_t cols);

}  // namespace tandem
