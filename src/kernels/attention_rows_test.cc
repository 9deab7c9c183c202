// The MLA attention's kernels in llama.cpp's decode-path order (DotF16RowsGgml,
// TransposeF16Rows + WeightedSumF16ColumnsGgml) against ggml_vec_dot_f16's AVX2 loop written out here, bit for
// bit, at this process's ISA level (ctest runs this binary at the scalar level too): head
// sizes with and without a remainder of 32 and of 8, row counts that fill, and do not
// fill, the last 32 positions (llama.cpp pads its rows to 256 cells; the reference does
// the same with zero probabilities).
#include "kernels/attention_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/isa.h"

namespace tandem {
namespace {

// ggml_vec_dot_f16 (AVX2, GGML_F16_STEP 32, 4 accumulators of 8) on float operands.
float GgmlVecDotF16(const std::vector<float>& x, const std::vector<float>& y) {
  const int n = static_cast<int>(x.size());
  const int np = n & ~31;
  float sum[4][8] = {};
  for (int i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) sum[j][l] = std::fma(x[i + 8 * j + l], y[i + 8 * j + l], sum[j][l]);
    }
  }
  // GGML_F32x8_REDUCE: x[0] += x[2], x[1] += x[3]; x[0] += x[1]; the halves; hadd twice.
  for (int l = 0; l < 8; ++l) {
    sum[0][l] = sum[0][l] + sum[2][l];
    sum[1][l] = sum[1][l] + sum[3][l];
  }
  for (int l = 0; l < 8; ++l) sum[0][l] = sum[0][l] + sum[1][l];
  float t0[4];
  for (int m = 0; m < 4; ++m) t0[m] = sum[0][m] + sum[0][m + 4];
  const float t1[2] = {t0[0] + t0[1], t0[2] + t0[3]};
  double sumf = t1[0] + t1[1];
  for (int i = np; i < n; ++i) sumf += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sumf);
}

std::vector<uint16_t> RandomFp16(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& h : v) h = Fp32ToFp16(u(rng));
  return v;
}

std::vector<float> Widen(const std::vector<uint16_t>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = Fp16ToFp32(h[i]);
  return f;
}

TEST(AttentionRowsGgmlTest, ScoresAreGgmlVecDotF16Bits) {
  std::mt19937 rng(11);
  for (int hd : {160, 576, 40, 64, 20}) {
    for (int g : {1, 3, 4}) {
      const int n = 37;
      std::vector<std::vector<uint16_t>> keys;
      std::vector<const uint16_t*> k_rows;
      for (int j = 0; j < n; ++j) keys.push_back(RandomFp16(hd, rng));
      for (auto& k : keys) k_rows.push_back(k.data());
      std::vector<std::vector<float>> q(g);
      std::vector<const float*> q_ptrs;
      std::vector<std::vector<float>> scores(g, std::vector<float>(n));
      std::vector<float*> s_ptrs;
      for (int h = 0; h < g; ++h) {
        q[h] = Widen(RandomFp16(hd, rng));
        q_ptrs.push_back(q[h].data());
        s_ptrs.push_back(scores[h].data());
      }
      const float scale = 0.0883883f;
      DotF16RowsGgml(q_ptrs.data(), g, k_rows.data(), n, hd, scale, s_ptrs.data());
      for (int h = 0; h < g; ++h) {
        for (int j = 0; j < n; ++j) {
          ASSERT_EQ(scores[h][j], GgmlVecDotF16(Widen(keys[j]), q[h]) * scale)
              << "hd " << hd << " head " << h << " key " << j << " at " << IsaLevelName(KernelIsaLevel());
        }
      }
    }
  }
}

TEST(AttentionRowsGgmlTest, WeightedSumsAreGgmlVecDotF16OverPaddedRows) {
  std::mt19937 rng(12);
  for (int n : {1, 7, 30, 32, 33, 100}) {
    for (int hd : {128, 24, 12}) {
      const int g = 2;
      std::vector<std::vector<uint16_t>> values;
      std::vector<const uint16_t*> v_rows;
      for (int j = 0; j < n; ++j) values.push_back(RandomFp16(hd, rng));
      for (auto& v : values) v_rows.push_back(v.data());
      std::vector<std::vector<float>> p(g), out(g, std::vector<float>(hd));
      std::vector<const float*> p_ptrs;
      std::vector<float*> o_ptrs;
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (int h = 0; h < g; ++h) {
        for (int j = 0; j < n; ++j) p[h].push_back(Fp16ToFp32(Fp32ToFp16(u(rng) / n)));
        p_ptrs.push_back(p[h].data());
        o_ptrs.push_back(out[h].data());
      }
      const int64_t stride = n + 5;  // a column stride longer than n, as for a sequence's longest range
      std::vector<uint16_t> vt(static_cast<size_t>(hd * stride), 0x7c00);  // +inf where nothing is written
      TransposeF16Rows(v_rows.data(), n, hd, vt.data(), stride);
      for (int d = 0; d < hd; ++d) {
        for (int j = 0; j < n; ++j) ASSERT_EQ(vt[d * stride + j], values[j][d]);
      }
      WeightedSumF16ColumnsGgml(p_ptrs.data(), g, vt.data(), stride, n, hd, o_ptrs.data());
      // llama.cpp's kqv: the transposed V (256 cells, the unused ones zero) against the
      // probabilities (zero where masked).
      for (int h = 0; h < g; ++h) {
        std::vector<float> probs(256, 0.0f);
        for (int j = 0; j < n; ++j) probs[j] = p[h][j];
        for (int d = 0; d < hd; ++d) {
          std::vector<float> column(256, 0.0f);
          for (int j = 0; j < n; ++j) column[j] = Fp16ToFp32(values[j][d]);
          ASSERT_EQ(out[h][d], GgmlVecDotF16(column, probs))
              << "n " << n << " hd " << hd << " head " << h << " value " << d << " at "
              << IsaLevelName(KernelIsaLevel());
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem
