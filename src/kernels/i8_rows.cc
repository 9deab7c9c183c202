// The kI8Rows product's driver and dispatch (i8_rows.h): activations quantized per token,
// then per block of tokens x block of rows the exact integer dots (one ISA kernel) and
// the float epilogue (each ISA's vectorization of I8FinishRows). The kernels are in
// i8_rows_{scalar,avx2,avx512}.cc.
#include "kernels/i8_rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/logging.h"
#include "kernels/i8_rows_internal.h"
#include "kernels/row_runs.h"

namespace tandem {
namespace {

// Activation bytes per token block: every weight row block of the thread's range meets
// one block of tokens while those stay in L2, then the next block (as matmul.cc's
// TokenBlock does for the other types).
constexpr int64_t kTokenBlockBytes = 192 << 10;
// Weight rows per block: a block's int32 dots (kRowBlock x the token block) stay in L1
// for the epilogue.
constexpr int64_t kRowBlock = 64;
// Decode's blocks (a few tokens): the interleaved runs span this many rows, so the
// block's dots stay small however long the matrix.
constexpr int64_t kRunsRowBlock = 2048;
// Columns per pass of a block of tokens (a multiple of 64): wider rows are taken in
// column chunks whose int32 dots add up, wrapping, to the exact dot, so a block's rows
// and tokens stay in L2 also at the 8960 columns of an FFN's down projection (1536 x 8960,
// 512 tokens, one thread: about 250 -> 310 GFLOP/s on the AVX-512 Xeon).
constexpr int64_t kColumnChunk = 2048;

// The integer dots of one block (I8DotArgs) by one kernel. An AMX-INT8 path (a later
// issue) goes here: tiles of int32 sums of u x q give the same integers as the others.
void Dots(Int8Kernel kernel, const I8DotArgs& a) {
  switch (kernel) {
    case Int8Kernel::kScalar:
      return I8DotsScalar(a);
    case Int8Kernel::kAvx2:
      return I8DotsYmm(VnniForm::kNone, a);
    case Int8Kernel::kAvxVnni:
      return I8DotsYmm(VnniForm::kVex, a);
    case Int8Kernel::kAvx512Vnni:
      return I8DotsAvx512(a);
  }
}

void Finish(Int8Kernel kernel, const I8FinishArgs& a) {
  switch (kernel) {
    case Int8Kernel::kScalar:
      return I8FinishScalar(a);
    case Int8Kernel::kAvx2:
    case Int8Kernel::kAvxVnni:
      return I8FinishAvx2(a);
    case Int8Kernel::kAvx512Vnni:
      return I8FinishAvx512(a);
  }
}

// Step 3 of i8_rows.h for rows wider than kI8MaxExactCols: dots in int64 (the K slices'
// exact int32 dots added), the same float steps.
void FinishWide(const Int8RowParams& p, const int64_t* dots, int64_t n, int64_t r0, float s_t,
                int64_t sum, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    if (p.is_static()) {
      y[i] = p.scale[r] * static_cast<float>(dots[i] + (p.bias != nullptr ? p.bias[r] : 0));
    } else if (p.offset == nullptr) {
      y[i] = s_t * (p.scale[r] * static_cast<float>(dots[i]));
    } else {
      const float centred = static_cast<float>(dots[i]) - p.offset[r] * static_cast<float>(sum);
      y[i] = s_t * (p.scale[r] * centred);
    }
  }
}

}  // namespace

void I8RowsCheck(const WeightMatrix& w) {
  TANDEM_CHECK(w.type == TensorType::kI8Rows);
  TANDEM_CHECK(w.i8 != nullptr && w.i8->scale != nullptr)
      << "a kI8Rows matrix without its Int8RowParams scales";
  TANDEM_CHECK(w.row_bytes >= w.cols)
      << "kI8Rows rows of " << w.row_bytes << " bytes for " << w.cols << " columns";
  TANDEM_CHECK(w.cols > 0 && w.cols <= kI8MaxCols) << "kI8Rows rows of " << w.cols << " columns";
  TANDEM_CHECK(w.i8->act_scale >= 0 && std::isfinite(w.i8->act_scale) &&
               std::isfinite(w.i8->act_offset))
      << "kI8Rows activation scale " << w.i8->act_scale << ", offset " << w.i8->act_offset;
  TANDEM_CHECK(!w.i8->is_static() || w.i8->offset == nullptr)
      << "kI8Rows weight offsets are for dynamic activation quantization only";
}

void QuantizeI8Activations(const float* x, int64_t cols, float act_scale, float act_offset,
                           uint8_t* u, float* s_t, int32_t* sum, Int8Kernel kernel) {
  if (kernel == Int8Kernel::kScalar) {
    QuantizeI8RowScalar(x, cols, act_scale, act_offset, u, s_t);
  } else {
    QuantizeI8RowAvx2(x, cols, act_scale, act_offset, u, s_t);
  }
  int32_t total = 0;  // of xq = u - 128: exact for cols <= kI8MaxCols
  for (int64_t k = 0; k < cols; ++k) total += u[k];
  *sum = static_cast<int32_t>(static_cast<uint32_t>(total) - (static_cast<uint32_t>(cols) << 7));
}

void I8RowsProduct(const WeightMatrix& w, const I8Tokens& x, int64_t n_tokens, float* y, int64_t r0,
                   int64_t r1, Int8Kernel kernel) {
  if (n_tokens <= 0 || r1 <= r0) return;
  const Int8RowParams& p = *w.i8;
  const int64_t cols = w.cols, slices = I8Slices(cols);
  TANDEM_CHECK(x.stride >= I8RowStride(cols));
  const auto* weights = reinterpret_cast<const int8_t*>(w.data);
  // One token streams its matrix from memory: the rows in interleaved runs over the
  // whole range (row_runs.h). More are bound by arithmetic: blocks of rows.
  const bool runs = n_tokens <= kMaxTokensForRuns;
  const int64_t chunk = runs ? cols : kColumnChunk;
  const int64_t token_block =
      std::max<int64_t>(4, kTokenBlockBytes / std::min(x.stride, chunk) / 4 * 4);
  const int64_t row_block = runs ? kRunsRowBlock : kRowBlock;
  thread_local std::vector<int32_t> dots, part;
  thread_local std::vector<int64_t> wide;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += token_block) {
    const int64_t nt = std::min(token_block, n_tokens - t0);
    for (int64_t b0 = r0; b0 < r1; b0 += row_block) {
      const int64_t nr = std::min(row_block, r1 - b0);
      dots.resize(static_cast<size_t>(nt * nr));
      I8DotArgs a;
      a.row_bytes = w.row_bytes;
      a.n_rows = nr;
      a.x_stride = x.stride;
      a.n_tokens = nt;
      a.dots = dots.data();
      a.dots_stride = nr;
      a.runs = runs;
      if (slices == 1) {
        for (int64_t k0 = 0; k0 < cols; k0 += chunk) {
          a.w = weights + b0 * w.row_bytes + k0;
          a.x = x.u + t0 * x.stride + k0;
          a.cols = std::min(chunk, cols - k0);
          if (k0 == 0) {
            a.dots = dots.data();
            Dots(kernel, a);
            continue;
          }
          part.resize(dots.size());
          a.dots = part.data();
          Dots(kernel, a);
          for (size_t i = 0; i < dots.size(); ++i) {
            dots[i] = static_cast<int32_t>(static_cast<uint32_t>(dots[i]) +
                                           static_cast<uint32_t>(part[i]));
          }
        }
        for (int64_t t = 0; t < nt; ++t) {
          I8FinishArgs f;
          f.dots = dots.data() + t * nr;
          f.n = nr;
          f.scale = p.scale + b0;
          f.offset = p.offset != nullptr ? p.offset + b0 : nullptr;
          f.bias = p.bias != nullptr ? p.bias + b0 : nullptr;
          f.is_static = p.is_static();
          f.s_t = f.is_static ? 0.0f : x.s[t0 + t];
          f.sum = x.sum[t0 + t];
          f.y = y + (t0 + t) * w.rows + b0;
          Finish(kernel, f);
        }
        continue;
      }
      // Wider rows than int32 holds exactly: K slices of exact int32 dots, added in int64.
      a.dots = dots.data();
      wide.assign(static_cast<size_t>(nt * nr), 0);
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t k0 = s * kI8SliceCols;
        a.w = weights + b0 * w.row_bytes + k0;
        a.x = x.u + t0 * x.stride + k0;
        a.cols = std::min(kI8SliceCols, cols - k0);
        Dots(kernel, a);
        for (size_t i = 0; i < wide.size(); ++i) wide[i] += dots[i];
      }
      for (int64_t t = 0; t < nt; ++t) {
        FinishWide(p, wide.data() + t * nr, nr, b0, p.is_static() ? 0.0f : x.s[t0 + t],
                   x.sum[t0 + t], y + (t0 + t) * w.rows + b0);
      }
    }
  }
}

void DequantizeI8Row(const WeightMatrix& w, int64_t row, float* out) {
  I8RowsCheck(w);
  TANDEM_CHECK(row >= 0 && row < w.rows) << "row " << row << " of " << w.rows;
  const Int8RowParams& p = *w.i8;
  const auto* q = reinterpret_cast<const int8_t*>(w.data + row * w.row_bytes);
  if (p.is_static()) {
    const float scale = p.scale[row] / p.act_scale;
    for (int64_t k = 0; k < w.cols; ++k) out[k] = static_cast<float>(q[k]) * scale;
    return;
  }
  const float offset = p.offset != nullptr ? p.offset[row] : 0.0f, scale = p.scale[row];
  for (int64_t k = 0; k < w.cols; ++k) out[k] = (static_cast<float>(q[k]) - offset) * scale;
}

float I8RowConstant(const WeightMatrix& w, int64_t row) {
  I8RowsCheck(w);
  TANDEM_CHECK(row >= 0 && row < w.rows) << "row " << row << " of " << w.rows;
  const Int8RowParams& p = *w.i8;
  if (!p.is_static()) return 0.0f;
  const auto* q = reinterpret_cast<const int8_t*>(w.data + row * w.row_bytes);
  int64_t sum = 0;
  for (int64_t k = 0; k < w.cols; ++k) sum += q[k];
  const double bias = p.bias != nullptr ? p.bias[row] : 0;
  return static_cast<float>(static_cast<double>(p.scale[row]) *
                            (bias + p.act_offset * static_cast<double>(sum)));
}

}  // namespace tandem
