// kI8Rows (per-output-channel int8 weights, W8A8): the numerics contract of i8_rows.h,
// bit for bit at every kernel this CPU runs and every batch size, against a reference
// written here from the contract, and against a double-precision product of the
// dequantized weights within the activations' quantization error.
#include "kernels/i8_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/matmul.h"

namespace tandem {
namespace {

// One kI8Rows matrix and its parameters, owned. The weight bytes end exactly at the end
// of their allocation, so a read past the last row is an ASan error.
struct I8Matrix {
  std::vector<int8_t> q;  // [rows, cols]
  std::vector<float> scale, offset;
  std::vector<int32_t> bias;
  Int8RowParams p;
  WeightMatrix w;

  I8Matrix() = default;
  I8Matrix(const I8Matrix&) = delete;
  I8Matrix& operator=(const I8Matrix&) = delete;
};

enum class Mode { kDynamic, kDynamicOffset, kStatic, kStaticBias };

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kDynamic:
      return "dynamic";
    case Mode::kDynamicOffset:
      return "dynamic+offset";
    case Mode::kStatic:
      return "static";
    case Mode::kStaticBias:
      return "static+bias";
  }
  return "?";
}

constexpr Mode kModes[] = {Mode::kDynamic, Mode::kDynamicOffset, Mode::kStatic, Mode::kStaticBias};

// Weights uniform over all of int8 (-128 and 127 included, the extremes planted in the
// first row), scales in [0.001, 0.01), offsets integral or not, biases up to +-5000.
std::unique_ptr<I8Matrix> MakeMatrix(int64_t rows, int64_t cols, Mode mode, std::mt19937& rng) {
  auto m = std::make_unique<I8Matrix>();
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  m->q.resize(static_cast<size_t>(rows * cols));
  for (auto& v : m->q) v = static_cast<int8_t>(byte(rng));
  if (cols >= 2) {
    m->q[0] = -128;
    m->q[1] = 127;
  }
  m->scale.resize(static_cast<size_t>(rows));
  for (auto& s : m->scale) s = 0.001f + 0.009f * unit(rng);
  if (mode == Mode::kDynamicOffset) {
    m->offset.resize(static_cast<size_t>(rows));
    for (size_t r = 0; r < m->offset.size(); ++r) {
      m->offset[r] = r % 2 == 0 ? std::round(8 * unit(rng) - 4) : 8 * unit(rng) - 4;
    }
    m->p.offset = m->offset.data();
  }
  if (mode == Mode::kStatic || mode == Mode::kStaticBias) {
    m->p.act_scale =
        0.03f;  // x ~ N(0, 1): |x / 0.03| stays well inside [-128, 127] but for rare tails
    m->p.act_offset = 3.0f;
  }
  if (mode == Mode::kStaticBias) {
    m->bias.resize(static_cast<size_t>(rows));
    std::uniform_int_distribution<int32_t> b(-5000, 5000);
    for (auto& v : m->bias) v = b(rng);
    m->p.bias = m->bias.data();
  }
  m->p.scale = m->scale.data();
  m->w.type = TensorType::kI8Rows;
  m->w.data = reinterpret_cast<const uint8_t*>(m->q.data());
  m->w.rows = rows;
  m->w.cols = cols;
  m->w.row_bytes = cols;
  m->w.i8 = &m->p;
  return m;
}

// n_tokens rows of cols values ~ N(0, 1); token 0 all zeros when asked, token 1 with one
// outlier (its other values quantize to few levels).
std::vector<float> MakeActivations(int64_t n_tokens, int64_t cols, bool zero_first,
                                   std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  for (auto& v : x) v = normal(rng);
  if (zero_first) std::fill(x.begin(), x.begin() + cols, 0.0f);
  if (n_tokens > 1) x[cols + cols / 2] = 40.0f;
  return x;
}

// Step 1 of i8_rows.h, written from the text.
struct RefRow {
  std::vector<int8_t> q;
  float s = 0;
  int64_t sum = 0;
};
RefRow RefQuantize(const float* x, int64_t cols, float act_scale, float act_offset) {
  RefRow row;
  row.q.resize(static_cast<size_t>(cols));
  auto q8 = [](float v) {
    return static_cast<int8_t>(std::clamp(std::nearbyint(v), -128.0f, 127.0f));
  };
  if (act_scale > 0) {
    for (int64_t k = 0; k < cols; ++k) row.q[k] = q8(x[k] / act_scale + act_offset);
  } else {
    float amax = 0;
    for (int64_t k = 0; k < cols; ++k) amax = std::max(amax, std::fabs(x[k]));
    row.s = amax / 127.0f;
    for (int64_t k = 0; k < cols; ++k) row.q[k] = amax == 0 ? 0 : q8(x[k] * (127.0f / amax));
  }
  for (int8_t v : row.q) row.sum += v;
  return row;
}

// Steps 2 and 3, from the text: the expected bits of every output.
std::vector<float> RefProduct(const I8Matrix& m, const std::vector<float>& x, int64_t n_tokens) {
  const int64_t rows = m.w.rows, cols = m.w.cols;
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const RefRow a = RefQuantize(&x[t * cols], cols, m.p.act_scale, m.p.act_offset);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t dot = 0;
      for (int64_t k = 0; k < cols; ++k) dot += int64_t{m.q[r * cols + k]} * a.q[k];
      float out;
      if (m.p.is_static()) {
        out = m.p.scale[r] * static_cast<float>(dot + (m.p.bias != nullptr ? m.p.bias[r] : 0));
      } else if (m.p.offset == nullptr) {
        out = a.s * (m.p.scale[r] * static_cast<float>(dot));
      } else {
        const float centred = static_cast<float>(dot) - m.p.offset[r] * static_cast<float>(a.sum);
        out = a.s * (m.p.scale[r] * centred);
      }
      y[t * rows + r] = out;
    }
  }
  return y;
}

// The product through one kernel: activations quantized by it, all rows.
std::vector<float> KernelProduct(const WeightMatrix& w, const std::vector<float>& x,
                                 int64_t n_tokens, Int8Kernel kernel, int64_t r0 = 0,
                                 int64_t r1 = -1) {
  const int64_t cols = w.cols, stride = I8RowStride(cols);
  std::vector<uint8_t> u(static_cast<size_t>(n_tokens * stride));
  std::vector<float> s(static_cast<size_t>(n_tokens));
  std::vector<int32_t> sums(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeI8Activations(&x[t * cols], cols, w.i8->act_scale, w.i8->act_offset, &u[t * stride],
                          &s[t], &sums[t], kernel);
  }
  const I8Tokens tokens{u.data(), stride, s.data(), sums.data()};
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows), -1.0f);
  I8RowsProduct(w, tokens, n_tokens, y.data(), r0, r1 < 0 ? w.rows : r1, kernel);
  return y;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Index of the first output whose bits differ, for the failure message (-1: none).
int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(std::min(a.size(), b.size()));
}

// The quantizer at every kernel: the bytes of step 1 (stored + 128), 128 (xq = 0) past
// cols, the sum; an all-zero row gives s_t = 0 and no NaN.
TEST(I8RowsTest, QuantizerFollowsTheContractAtEveryKernel) {
  std::mt19937 rng(1);
  for (int64_t cols : {1, 7, 31, 32, 33, 100, 1000, 2049}) {
    const std::vector<float> x = MakeActivations(3, cols, true, rng);
    for (float act_scale : {0.0f, 0.03f, 0.004f}) {  // 0.004: many values clamp
      for (int64_t t = 0; t < 3; ++t) {
        const RefRow want =
            RefQuantize(&x[t * cols], cols, act_scale, act_scale > 0 ? -5.0f : 0.0f);
        for (Int8Kernel kernel : RunnableInt8Kernels()) {
          std::vector<uint8_t> u(static_cast<size_t>(I8RowStride(cols)), 99);
          float s = -1;
          int32_t sum = 0;
          QuantizeI8Activations(&x[t * cols], cols, act_scale, act_scale > 0 ? -5.0f : 0.0f,
                                u.data(), &s, &sum, kernel);
          SCOPED_TRACE(std::string(Int8KernelName(kernel)) + " cols " + std::to_string(cols) +
                       " token " + std::to_string(t) + " act_scale " + std::to_string(act_scale));
          for (int64_t k = 0; k < cols; ++k)
            ASSERT_EQ(u[k], static_cast<uint8_t>(want.q[k] + 128)) << k;
          for (size_t k = static_cast<size_t>(cols); k < u.size(); ++k) ASSERT_EQ(u[k], 128);
          EXPECT_EQ(std::memcmp(&s, &want.s, sizeof(float)), 0) << s << " vs " << want.s;
          EXPECT_EQ(sum, want.sum);
          if (act_scale == 0 && t == 0) {
            EXPECT_EQ(s, 0.0f);
          }
        }
      }
    }
  }
}

// Rounding is half to even, and dynamic quantization stays in [-127, 127].
TEST(I8RowsTest, RoundsHalfToEven) {
  const float x[] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 127.0f, -127.0f};
  const int want[] = {0, 2, 2, 0, -2, 127, -127};
  for (Int8Kernel kernel : RunnableInt8Kernels()) {
    uint8_t u[64];
    float s;
    int32_t sum;
    QuantizeI8Activations(x, 7, 1.0f, 0.0f, u, &s, &sum, kernel);  // static, scale 1: x itself
    for (int k = 0; k < 7; ++k)
      EXPECT_EQ(u[k] - 128, want[k]) << Int8KernelName(kernel) << " " << k;
    EXPECT_EQ(sum, 2);
    QuantizeI8Activations(x, 7, 0.0f, 0.0f, u, &s, &sum, kernel);  // dynamic: amax 127 -> scale 1
    EXPECT_EQ(s, 1.0f);
    for (int k = 0; k < 7; ++k)
      EXPECT_EQ(u[k] - 128, want[k]) << Int8KernelName(kernel) << " " << k;
  }
}

// Every kernel gives the contract's bits, for odd shapes (columns not a multiple of 32
// or 64, rows not of 4, 1 to 37 tokens, padded rows, a range of rows), each mode; so
// every kernel gives every other's bits.
TEST(I8RowsTest, EveryKernelGivesTheContractsBits) {
  std::mt19937 rng(2);
  struct Case {
    int64_t rows, cols, tokens;
  };
  // Decode's interleaved runs over blocks of 2048 rows: 4103 and 2050 rows.
  const Case cases[] = {{1, 1, 1},   {5, 3, 2},     {37, 100, 1},   {33, 1000, 33},
                        {9, 63, 37}, {64, 2048, 5}, {130, 577, 17}, {6, 65, 3},
                        {18, 64, 8}, {7, 1536, 4},  {4103, 40, 1},  {2050, 65, 2}};
  for (const Case& c : cases) {
    for (Mode mode : kModes) {
      const auto m = MakeMatrix(c.rows, c.cols, mode, rng);
      const std::vector<float> x = MakeActivations(c.tokens, c.cols, true, rng);
      const std::vector<float> want = RefProduct(*m, x, c.tokens);
      for (Int8Kernel kernel : RunnableInt8Kernels()) {
        const std::vector<float> got = KernelProduct(m->w, x, c.tokens, kernel);
        EXPECT_TRUE(SameBits(got, want))
            << Int8KernelName(kernel) << " " << ModeName(mode) << " " << c.rows << "x" << c.cols
            << ", " << c.tokens << " tokens: first difference at " << FirstDifference(got, want);
      }
    }
  }
  // Rows further apart than their width (row_bytes > cols; the last row ends the buffer).
  {
    const auto m = MakeMatrix(11, 70, Mode::kDynamicOffset, rng);
    const int64_t row_bytes = 75;
    std::vector<int8_t> padded(static_cast<size_t>(10 * row_bytes + 70), 55);
    for (int64_t r = 0; r < 11; ++r) std::copy_n(&m->q[r * 70], 70, &padded[r * row_bytes]);
    WeightMatrix w = m->w;
    w.data = reinterpret_cast<const uint8_t*>(padded.data());
    w.row_bytes = row_bytes;
    const std::vector<float> x = MakeActivations(6, 70, false, rng);
    const std::vector<float> want = RefProduct(*m, x, 6);
    for (Int8Kernel kernel : RunnableInt8Kernels()) {
      EXPECT_TRUE(SameBits(KernelProduct(w, x, 6, kernel), want))
          << Int8KernelName(kernel) << " padded rows";
    }
  }
  // Rows [r0, r1) only: the others untouched.
  const auto m = MakeMatrix(41, 200, Mode::kDynamicOffset, rng);
  const std::vector<float> x = MakeActivations(6, 200, false, rng);
  const std::vector<float> want = RefProduct(*m, x, 6);
  for (Int8Kernel kernel : RunnableInt8Kernels()) {
    const std::vector<float> got = KernelProduct(m->w, x, 6, kernel, 13, 30);
    for (int64_t t = 0; t < 6; ++t) {
      for (int64_t r = 0; r < 41; ++r) {
        const float expected = r >= 13 && r < 30 ? want[t * 41 + r] : -1.0f;
        ASSERT_EQ(std::memcmp(&got[t * 41 + r], &expected, 4), 0)
            << Int8KernelName(kernel) << " t " << t << " r " << r;
      }
    }
  }
}

// The product against double precision on the dequantized weights (DequantizeI8Row,
// I8RowConstant): within the activations' quantization error, |x - s * xq| <= s / 2 per
// value (s = s_t, or act_scale), so |y - ref| <= s / 2 * sum_k |w[k]|, plus float
// rounding (1e-5 of sum_k |w[k] x[k]|).
TEST(I8RowsTest, CloseToTheDequantizedProduct) {
  std::mt19937 rng(3);
  const int64_t rows = 23, cols = 1000, n_tokens = 9;
  for (Mode mode : kModes) {
    const auto m = MakeMatrix(rows, cols, mode, rng);
    std::vector<float> x = MakeActivations(n_tokens, cols, true, rng);
    if (m->p.is_static()) {  // no value clamped, so the error bound holds
      for (auto& v : x) v = std::clamp(v, -3.5f, 3.5f);
    }
    std::vector<float> y(static_cast<size_t>(n_tokens * rows));
    MatMul(m->w, x.data(), n_tokens, y.data(), nullptr);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeI8Row(m->w, r, row.data());
      for (int64_t t = 0; t < n_tokens; ++t) {
        double ref = I8RowConstant(m->w, r), abs_w = 0, abs_wx = 0, amax = 0;
        for (int64_t k = 0; k < cols; ++k) {
          ref += double{row[k]} * x[t * cols + k];
          abs_w += std::fabs(row[k]);
          abs_wx += std::fabs(double{row[k]} * x[t * cols + k]);
          amax = std::max(amax, double{std::fabs(x[t * cols + k])});
        }
        const double s = m->p.is_static() ? m->p.act_scale : amax / 127;
        const double tol = s / 2 * abs_w * (1 + 1e-5) + 1e-5 * (abs_wx + std::fabs(ref)) + 1e-6;
        ASSERT_TRUE(std::isfinite(y[t * rows + r]));
        EXPECT_NEAR(y[t * rows + r], ref, tol) << ModeName(mode) << " row " << r << " token " << t;
      }
    }
  }
}

// All-zero activations: 0 (dynamic: s_t = 0, no NaN), or the static constant's bits.
TEST(I8RowsTest, ZeroActivationsGiveZeroOrTheStaticBias) {
  std::mt19937 rng(4);
  for (Mode mode : kModes) {
    const auto m = MakeMatrix(21, 130, mode, rng);
    const std::vector<float> x(static_cast<size_t>(5 * 130), 0.0f);
    const std::vector<float> want = RefProduct(*m, x, 5);
    for (Int8Kernel kernel : RunnableInt8Kernels()) {
      const std::vector<float> got = KernelProduct(m->w, x, 5, kernel);
      EXPECT_TRUE(SameBits(got, want)) << Int8KernelName(kernel) << " " << ModeName(mode);
      for (float v : got) {
        ASSERT_TRUE(std::isfinite(v));
        if (!m->p.is_static()) {
          ASSERT_EQ(v, 0.0f);
        }
      }
    }
  }
}

// Batch invariance through MatMul: each token of a 37-token call (token blocks, row
// groups, the pool) has the bits of a 1-token call and of a call over any window.
TEST(I8RowsTest, BatchSizeAndPoolNeverChangeAToken) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t rows = 70, cols = 333, n_tokens = 37;
  for (Mode mode : kModes) {
    const auto m = MakeMatrix(rows, cols, mode, rng);
    const std::vector<float> x = MakeActivations(n_tokens, cols, true, rng);
    std::vector<float> all(static_cast<size_t>(n_tokens * rows));
    MatMul(m->w, x.data(), n_tokens, all.data(), nullptr);
    EXPECT_TRUE(SameBits(all, RefProduct(*m, x, n_tokens))) << ModeName(mode);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> pooled(all.size());
      MatMul(m->w, x.data(), n_tokens, pooled.data(), p);
      EXPECT_TRUE(SameBits(pooled, all)) << ModeName(mode);
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::vector<float> one(static_cast<size_t>(rows));
        MatMul(m->w, &x[t * cols], 1, one.data(), p);
        ASSERT_EQ(std::memcmp(one.data(), &all[t * rows], rows * 4), 0)
            << ModeName(mode) << " token " << t;
      }
      for (int64_t t0 : {0, 3, 30}) {
        const int64_t n = std::min<int64_t>(7, n_tokens - t0);
        std::vector<float> part(static_cast<size_t>(n * rows));
        MatMul(m->w, &x[t0 * cols], n, part.data(), p);
        ASSERT_EQ(std::memcmp(part.data(), &all[t0 * rows], part.size() * 4), 0)
            << ModeName(mode) << " from " << t0;
      }
    }
  }
  // A long call (several token blocks of 192 tokens at 1024 columns) against short ones.
  const auto m = MakeMatrix(20, 1000, Mode::kDynamic, rng);
  const int64_t long_tokens = 450;
  const std::vector<float> x = MakeActivations(long_tokens, 1000, false, rng);
  std::vector<float> all(static_cast<size_t>(long_tokens * 20));
  MatMul(m->w, x.data(), long_tokens, all.data(), &pool);
  for (int64_t t0 : {0, 190, 380, 445}) {
    const int64_t n = std::min<int64_t>(5, long_tokens - t0);
    std::vector<float> part(static_cast<size_t>(n * 20));
    MatMul(m->w, &x[t0 * 1000], n, part.data(), nullptr);
    ASSERT_EQ(std::memcmp(part.data(), &all[t0 * 20], part.size() * 4), 0) << "from " << t0;
  }
}

// Prepared inputs: a gathered MatMulInput gives MatMul's bits; a dynamic preparation is
// shared by every dynamic kI8Rows matrix of its width (the MoE experts), a static one only
// by matrices with the same activation parameters; MatMulSameInput gives each MatMul's bits.
TEST(I8RowsTest, PreparedInputsGiveMatMulsBits) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  const int64_t rows = 30, cols = 260, n_tokens = 23;
  const std::vector<float> x = MakeActivations(n_tokens, cols, true, rng);
  const std::vector<int64_t> pick = {5, 0, 22, 7, 7, 13, 1, 2, 3, 19, 20, 4, 6, 8, 9, 10, 11};
  const auto n = static_cast<int64_t>(pick.size());
  std::vector<float> gathered;
  for (int64_t r : pick)
    gathered.insert(gathered.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
  for (Mode mode : kModes) {
    const auto m = MakeMatrix(rows, cols, mode, rng);
    MatMulInput all, some;
    all.Prepare(m->w, x.data(), n_tokens, &pool);
    some.Gather(all, pick.data(), n);
    ASSERT_TRUE(some.Fits(m->w));
    EXPECT_EQ(some.Fits(TensorType::kI8Rows, cols), !m->p.is_static());
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size(), -1.0f);
      MatMul(m->w, gathered.data(), n, want.data(), p);
      MatMul(m->w, some, 0, n, got.data(), p);
      EXPECT_TRUE(SameBits(got, want)) << ModeName(mode);
      std::vector<float> want8(static_cast<size_t>(8 * rows)), got8(want8.size(), -1.0f);
      MatMul(m->w, gathered.data() + 9 * cols, 8, want8.data(), p);
      MatMul(m->w, some, 9, 8, got8.data(), p);
      EXPECT_TRUE(SameBits(got8, want8)) << ModeName(mode);
    }
  }
  // Sharing rules.
  const auto dyn_a = MakeMatrix(8, cols, Mode::kDynamic, rng);
  const auto dyn_b = MakeMatrix(12, cols, Mode::kDynamicOffset, rng);
  const auto st_a = MakeMatrix(8, cols, Mode::kStatic, rng);
  const auto st_b = MakeMatrix(8, cols, Mode::kStaticBias, rng);  // same act_scale / act_offset
  const auto st_c = MakeMatrix(8, cols, Mode::kStatic, rng);
  st_c->p.act_offset = -1.0f;
  MatMulInput dyn, st, by_type;
  dyn.Prepare(dyn_a->w, x.data(), n_tokens, nullptr);
  st.Prepare(st_a->w, x.data(), n_tokens, nullptr);
  by_type.Prepare(TensorType::kI8Rows, cols, x.data(), n_tokens, nullptr);
  EXPECT_TRUE(dyn.Fits(dyn_b->w));
  EXPECT_TRUE(by_type.Fits(dyn_b->w));
  EXPECT_FALSE(dyn.Fits(st_a->w));
  EXPECT_TRUE(st.Fits(st_b->w));
  EXPECT_FALSE(st.Fits(st_c->w));
  EXPECT_FALSE(st.Fits(dyn_a->w));
  EXPECT_FALSE(st.Fits(TensorType::kI8Rows, cols));
  EXPECT_FALSE(dyn.Fits(TensorType::kQ8_0, cols));
  EXPECT_FALSE(by_type.Fits(TensorType::kI8Rows, cols + 1));
  std::vector<float> want(static_cast<size_t>(n_tokens * 12)), got(want.size());
  MatMul(dyn_b->w, x.data(), n_tokens, want.data(), nullptr);
  MatMul(dyn_b->w, by_type, 0, n_tokens, got.data(), nullptr);
  EXPECT_TRUE(SameBits(got, want));

  const I8Matrix* ms[] = {dyn_a.get(), st_a.get(), dyn_b.get(), st_b.get(), st_c.get()};
  std::vector<std::vector<float>> wants, gots;
  for (const I8Matrix* mat : ms) {
    wants.emplace_back(static_cast<size_t>(n_tokens * mat->w.rows));
    gots.emplace_back(static_cast<size_t>(n_tokens * mat->w.rows), -1.0f);
    MatMul(mat->w, x.data(), n_tokens, wants.back().data(), &pool);
  }
  MatMulSameInput({{&ms[0]->w, gots[0].data()},
                   {&ms[1]->w, gots[1].data()},
                   {&ms[2]->w, gots[2].data()},
                   {&ms[3]->w, gots[3].data()},
                   {&ms[4]->w, gots[4].data()}},
                  x.data(), n_tokens, &pool);
  for (size_t i = 0; i < wants.size(); ++i) EXPECT_TRUE(SameBits(gots[i], wants[i])) << i;
}

// Rows wider than kI8MaxExactCols: K slices added in int64. All weights and activations
// at -128 make every dot 2^14 * cols > 2^31, which int32 would wrap.
TEST(I8RowsTest, WideRowsAreExact) {
  const int64_t rows = 3, cols = 140000, n_tokens = 2;
  std::mt19937 rng(7);
  auto m = MakeMatrix(rows, cols, Mode::kStaticBias, rng);
  std::fill(m->q.begin(), m->q.end(), int8_t{-128});
  m->q[5] = 17;
  m->p.act_scale = 1.0f;
  m->p.act_offset = 0.0f;
  std::vector<float> x(static_cast<size_t>(n_tokens * cols), -1000.0f);  // -> -128
  x[cols + 3] = 2.0f;
  const std::vector<float> want = RefProduct(*m, x, n_tokens);
  EXPECT_GT(want[1], 1e9f * m->p.scale[1]);  // the dot is near 2.3e9
  for (Int8Kernel kernel : RunnableInt8Kernels()) {
    EXPECT_TRUE(SameBits(KernelProduct(m->w, x, n_tokens, kernel), want)) << Int8KernelName(kernel);
  }
  // Dynamic with offsets, random values.
  auto d = MakeMatrix(rows, cols, Mode::kDynamicOffset, rng);
  const std::vector<float> xd = MakeActivations(n_tokens, cols, false, rng);
  const std::vector<float> want_d = RefProduct(*d, xd, n_tokens);
  for (Int8Kernel kernel : RunnableInt8Kernels()) {
    EXPECT_TRUE(SameBits(KernelProduct(d->w, xd, n_tokens, kernel), want_d))
        << Int8KernelName(kernel);
  }
}

// GetRow (the embedding lookup) and DequantizeI8Row give the documented floats.
TEST(I8RowsTest, DequantizedRows) {
  std::mt19937 rng(8);
  for (Mode mode : kModes) {
    const auto m = MakeMatrix(4, 37, mode, rng);
    std::vector<float> row(37), got(37);
    for (int64_t r = 0; r < 4; ++r) {
      GetRow(m->w, r, got.data());
      for (int64_t k = 0; k < 37; ++k) {
        const float q = m->q[r * 37 + k];
        row[k] = m->p.is_static()
                     ? q * (m->p.scale[r] / m->p.act_scale)
                     : (q - (m->p.offset != nullptr ? m->p.offset[r] : 0.0f)) * m->p.scale[r];
      }
      EXPECT_TRUE(SameBits(got, row)) << ModeName(mode) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace tandem
