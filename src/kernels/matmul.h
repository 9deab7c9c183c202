// Matrix multiplication of (possibly quantized) weight matrices with float activations.
//
// A weight matrix is stored row-major as GGUF/GGML store it: `rows` rows of `cols`
// values (cols = the GGUF tensor's dims[0]), each row `RowBytes(type, cols)` bytes.
// y = x · Wᵀ, i.e. for each token t and output row r: y[t][r] = dot(W[r], x[t]).
//
// Thread safety: reentrant; the pool's ParallelFor is used by one caller at a time.
#pragma once

#include <cstdint>

#include "common/tensor_type.h"

namespace tandem {

class ThreadPool;

struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;  // not owned (points into the mmapped model file)
  int64_t rows = 0;               // output features
  int64_t cols = 0;               // input features (contiguous)
  int64_t row_bytes = 0;

  bool valid() const { return data != nullptr; }
};

// y[n_tokens, w.rows] = x[n_tokens, w.cols] · Wᵀ. `pool` may be null (single thread).
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Copies row `row` of `w` into out[w.cols] as floats (embedding lookup).
void GetRow(const WeightMatrix& w, int64_t row, float* out);

}  // namespace tandem
