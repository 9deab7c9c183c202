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

// Per-output-row parameters of a TensorType::kI8Rows matrix (W8A8). Not owned: the
// arrays point into the model file or the loader's copies and outlive every MatMul.
// The numerics (rounding, integer dots, the order of the float steps) are in
// kernels/i8_rows.h.
struct Int8RowParams {
  const float* scale = nullptr;   // [rows]: w[r][k] = (q[r][k] - offset[r]) * scale[r]  (dynamic)
                                  //         static: the dequantization scale deq_scale[r]
  const float* offset = nullptr;  // [rows] or null (symmetric weights); dynamic only
  // Static activation quantization (msmodelslim W8A8): act_scale > 0 means
  // xq = clamp(round(x / act_scale + act_offset), -128, 127) per tensor, and
  // y[r] = (xq . q[r] + bias[r]) * scale[r]. act_scale == 0: dynamic per-token symmetric
  // quantization (xq = round(x * (127 / max|x_t|)), s_t = max|x_t| / 127, as vLLM),
  // y[r] = s_t * scale[r] * (xq . q[r] - offset[r] * sum(xq)).
  float act_scale = 0;
  float act_offset = 0;
  const int32_t* bias = nullptr;  // [rows], static only (quant_bias), may be null

  bool is_static() const { return act_scale > 0; }
};

struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;  // not owned (points into the mmapped model file)
  int64_t rows = 0;               // output features
  int64_t cols = 0;               // input features (contiguous)
  int64_t row_bytes = 0;
  const Int8RowParams* i8 = nullptr;  // kI8Rows only (required there); not owned

  bool valid() const { return data != nullptr; }
};

// y[n_tokens, w.rows] = x[n_tokens, w.cols] · Wᵀ. `pool` may be null (single thread).
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Activation rows prepared (quantized) for one kind of weight matrix, so that several
// MatMuls share one preparation: an MoE layer prepares each token once for the gate and
// up projections of all its experts, and gathers each expert's rows. MatMul on a
// prepared input gives the bits MatMul gives on the float rows.
//
// kI8Rows weights: the preparation by type (Prepare / Fits with a type) is the dynamic
// per-token quantization, which every dynamic kI8Rows matrix of those columns shares (an
// MoE layer's W8A8_DYNAMIC experts). A matrix with static activation quantization needs
// its own act_scale / act_offset: prepare for it with the WeightMatrix overloads, which
// share one preparation between matrices whose parameters are equal (bit for bit).
class MatMulInput {
 public:
  // x[n_tokens, cols] prepared for weights of `type`, as MatMul prepares it (kI8Rows:
  // dynamic quantization).
  void Prepare(TensorType type, int64_t cols, const float* x, int64_t n_tokens, ThreadPool* pool);
  // x[n_tokens, w.cols] prepared as MatMul(w, x, ...) prepares it (kI8Rows: with w.i8's
  // activation parameters). Preconditions: w.valid().
  void Prepare(const WeightMatrix& w, const float* x, int64_t n_tokens, ThreadPool* pool);
  // Row i = row rows[i] of `from` (another prepared input), for i < n.
  void Gather(const MatMulInput& from, const int64_t* rows, int64_t n);
  // Whether MatMul can take this input with weights of `type` and `cols` columns (the
  // same preparation; kI8Rows: the dynamic one).
  bool Fits(TensorType type, int64_t cols) const;
  // Whether MatMul can take this input with `w` (kI8Rows: also the same activation
  // quantization, static parameters included).
  bool Fits(const WeightMatrix& w) const;
  int64_t n_tokens() const { return n_; }
  // False when MatMul reads the float rows as they are (F32 weights): nothing to share.
  static bool NeedsPreparation(TensorType type, int64_t cols);

 private:
  friend void MatMul(const WeightMatrix&, const MatMulInput&, int64_t, int64_t, float*, ThreadPool*);
  enum class Kind { kNone, kTile, kQuantized, kFloat, kI8 };
  // The preparation weights of `type` take; *key: the tile offset or the activation format.
  static Kind KindOf(TensorType type, int64_t cols, int* key);
  // Prepare's body; i8: the activation quantization of kI8Rows weights (null: dynamic).
  void PrepareFor(TensorType type, int64_t cols, const Int8RowParams* i8, const float* x,
                  int64_t n_tokens, ThreadPool* pool);
  // Storage for n rows of this kind (n_ = n).
  void Resize(int64_t n);
  // kI8: row i of the activations.
  uint8_t* i8_row(int64_t i) { return bytes_.data() + align_ + i * row_bytes_; }
  const uint8_t* i8_row(int64_t i) const { return bytes_.data() + align_ + i * row_bytes_; }

  Kind kind_ = Kind::kNone;
  int key_ = 0;
  int64_t cols_ = 0, n_ = 0, row_bytes_ = 0;
  // kI8: static activation quantization (act_scale > 0) or dynamic (0).
  float act_scale_ = 0, act_offset_ = 0;
  std::vector<int8_t> q_;       // kTile: cols values per row
  std::vector<float> d_;        // kTile: cols / 8 scale lanes per row; kI8: s_t per row (dynamic)
  std::vector<int32_t> c_;      // kTile: cols / 8 corrections per row; kI8: sum of xq per row
  std::vector<uint8_t> bytes_;  // kQuantized: format rows; kFloat: float rows; kI8: xq + 128 rows
                                // (I8RowStride bytes each) from bytes_[align_], 64-byte aligned
  int64_t align_ = 0;
};

// Several matrices over the same input: for each (w, y), y = x · wᵀ, with x prepared once
// per distinct preparation (the attention's q, k and v projections; the FFN's gate and
// up). The same bits as one MatMul each.
void MatMulSameInput(std::initializer_list<std::pair<const WeightMatrix*, float*>> products, const float* x,
                     int64_t n_tokens, ThreadPool* pool);

// y[n, w.rows] = rows [first, first + n) of x · Wᵀ.
// Preconditions: x.Fits(w); first + n <= x.n_tokens().
void MatMul(const WeightMatrix& w, const MatMulInput& x, int64_t first, int64_t n, float* y, ThreadPool* pool);

// Copies row `row` of `w` into out[w.cols] as floats (embedding lookup; kI8Rows:
// DequantizeI8Row).
void GetRow(const WeightMatrix& w, int64_t row, float* out);

// Row `row` of a kI8Rows matrix as floats, out[w.cols]: dynamic (act_scale == 0)
// out[k] = ((float)q[k] - offset[row]) * scale[row] (offset 0 when null); static
// out[k] = (float)q[k] * (scale[row] / act_scale), the weights that x meets before its
// quantization: the static product is then about x . out + I8RowConstant(w, row).
// Preconditions: w.type == kI8Rows, w.i8 set, 0 <= row < w.rows.
void DequantizeI8Row(const WeightMatrix& w, int64_t row, float* out);
// The constant term of row `row` of a static kI8Rows product, as a float:
// scale[row] * (bias[row] + act_offset * sum_k q[row][k]) (bias 0 when null); 0 when dynamic.
float I8RowConstant(const WeightMatrix& w, int64_t row);

}  // namespace tandem
