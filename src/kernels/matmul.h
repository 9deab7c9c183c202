// Matrix multiplication of (possibly quantized) weight matrices with float activations.
//
// A weight matrix is stored row-major as GGUF/GGML store it: `rows` rows of `cols`
// values (cols = the GGUF tensor's dims[0]), each row `RowBytes(type, cols)` bytes.
// y = x · Wᵀ, i.e. for each token t and output row r: y[t][r] = dot(W[r], x[t]).
//
// Thread safety: reentrant; the pool's ParallelFor is used by one caller at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "common/tensor_type.h"

namespace tandem {

class ThreadPool;

// Per-output-row parameters of a TensorType::kI8Rows matrix (W8A8).
struct Int8RowParams {
  const float* scale = nullptr;   // [rows]: w[r][k] = (q[r][k] - offset[r]) * scale[r]  (dynamic)
                                  //         static: the dequantization scale deq_scale[r]
  const float* offset = nullptr;  // [rows] or null (symmetric weights); dynamic only
  // Static activation quantization (msmodelslim W8A8): act_scale > 0 means
  // xq = clamp(round(x / act_scale + act_offset), -128, 127) per tensor, and
  // y[r] = (xq . q[r] + bias[r]) * scale[r]. act_scale == 0: dynamic per-token symmetric
  // quantization (xq = round(x / s_t), s_t = max|x_t| / 127),
  // y[r] = s_t * scale[r] * (xq . q[r] - offset[r] * sum(xq)).
  float act_scale = 0;
  float act_offset = 0;
  const int32_t* bias = nullptr;  // [rows], static only (quant_bias), may be null
};

struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;  // not owned (points into the mmapped model file)
  int64_t rows = 0;               // output features
  int64_t cols = 0;               // input features (contiguous)
  int64_t row_bytes = 0;
  const Int8RowParams* i8 = nullptr;  // kI8Rows only

  bool valid() const { return data != nullptr; }
};

// y[n_tokens, w.rows] = x[n_tokens, w.cols] · Wᵀ. `pool` may be null (single thread).
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Activation rows prepared (quantized) for one kind of weight matrix, so that several
// MatMuls share one preparation: an MoE layer prepares each token once for the gate and
// up projections of all its experts, and gathers each expert's rows. MatMul on a
// prepared input gives the bits MatMul gives on the float rows.
class MatMulInput {
 public:
  // x[n_tokens, cols] prepared for weights of `type`, as MatMul prepares it.
  void Prepare(TensorType type, int64_t cols, const float* x, int64_t n_tokens, ThreadPool* pool);
  // Row i = row rows[i] of `from` (another prepared input), for i < n.
  void Gather(const MatMulInput& from, const int64_t* rows, int64_t n);
  // Whether MatMul can take this input with weights of `type` and `cols` columns (the
  // same preparation).
  bool Fits(TensorType type, int64_t cols) const;
  int64_t n_tokens() const { return n_; }
  // False when MatMul reads the float rows as they are (F32 weights): nothing to share.
  static bool NeedsPreparation(TensorType type, int64_t cols);

 private:
  friend void MatMul(const WeightMatrix&, const MatMulInput&, int64_t, int64_t, float*, ThreadPool*);
  enum class Kind { kNone, kTile, kQuantized, kFloat };
  // The preparation weights of `type` take; *key: the tile offset or the activation format.
  static Kind KindOf(TensorType type, int64_t cols, int* key);
  // Storage for n rows of this kind (n_ = n).
  void Resize(int64_t n);

  Kind kind_ = Kind::kNone;
  int key_ = 0;
  int64_t cols_ = 0, n_ = 0, row_bytes_ = 0;
  std::vector<int8_t> q_;       // kTile: cols values per row
  std::vector<float> d_;        // kTile: cols / 8 scale lanes per row
  std::vector<int32_t> c_;      // kTile: cols / 8 corrections per row
  std::vector<uint8_t> bytes_;  // kQuantized: format rows; kFloat: float rows
};

// Several matrices over the same input: for each (w, y), y = x · wᵀ, with x prepared once
// per distinct preparation (the attention's q, k and v projections; the FFN's gate and
// up). The same bits as one MatMul each.
void MatMulSameInput(std::initializer_list<std::pair<const WeightMatrix*, float*>> products, const float* x,
                     int64_t n_tokens, ThreadPool* pool);

// y[n, w.rows] = rows [first, first + n) of x · Wᵀ.
// Preconditions: x.Fits(w.type, w.cols); first + n <= x.n_tokens().
void MatMul(const WeightMatrix& w, const MatMulInput& x, int64_t first, int64_t n, float* y, ThreadPool* pool);

// Copies row `row` of `w` into out[w.cols] as floats (embedding lookup).
void GetRow(const WeightMatrix& w, int64_t row, float* out);

}  // namespace tandem
