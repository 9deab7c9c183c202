#include "kernels/q0_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels/quant_dot.h"

namespace tandem {
namespace {

// n_blocks random blocks of `type` (Q8_0 values over the whole int8 range, -128 included).
std::vector<uint8_t> RandomBlocks(TensorType type, int64_t n_blocks, std::mt19937& rng) {
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks * block_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const Fp16Bits d = Fp32ToFp16(scale(rng));
    std::memcpy(&row[i * block_bytes], &d, sizeof(d));
  }
  return row;
}

// Value i of block b, from the stored bits.
int WeightValue(TensorType type, const uint8_t* row, int64_t b, int i) {
  if (type == TensorType::kQ8_0) return reinterpret_cast<const BlockQ8_0*>(row)[b].qs[i];
  const BlockQ5_0& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
  uint32_t qh;
  std::memcpy(&qh, blk.qh, sizeof(qh));
  const int nibble = i < 16 ? blk.qs[i] & 0x0F : blk.qs[i - 16] >> 4;
  return (nibble | static_cast<int>((qh >> i) & 1) << 4) - 16;
}

// llama.cpp's x86 order written out (tinyBLAS_Q0_AVX, ggml_vec_dot_q8_0_q8_0): 8 lanes of
// 4 products per block, fma(d_w * d_x, lane, acc) per lane, hsum_float_8.
float LlamaCppDot(TensorType type, const uint8_t* w, const BlockQ8_0* x, int64_t n_blocks) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    Fp16Bits dw;
    std::memcpy(&dw, w + b * TraitsOf(type).block_bytes, sizeof(dw));
    const float d = Fp16ToFp32(dw) * Fp16ToFp32(x[b].d);
    for (int j = 0; j < 8; ++j) {
      int lane = 0;
      for (int i = 4 * j; i < 4 * j + 4; ++i) lane += WeightValue(type, w, b, i) * x[b].qs[i];
      acc[j] = std::fma(d, static_cast<float>(lane), acc[j]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Every kernel this CPU runs gives llama.cpp's bits, and VecDotQ8's (one token), for every
// token, in the tile and in the row path: odd token counts (the last pair repeats its
// token), 1-4 pairs per tile call, tiles whose rows repeat.
TEST(Q0GemmTest, EveryKernelGivesLlamaCppsBits) {
  std::mt19937 rng(5);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0}) {
    for (int64_t n_blocks : {1, 2, 5, 24}) {
      const int64_t cols = 32 * n_blocks;
      std::vector<std::vector<uint8_t>> w;
      for (int r = 0; r < 3; ++r) w.push_back(RandomBlocks(type, n_blocks, rng));
      std::vector<uint8_t> u(static_cast<size_t>(3 * 32 * n_blocks));
      std::vector<float> d(static_cast<size_t>(3 * n_blocks));
      Q0Row rows[4];
      for (int r = 0; r < 3; ++r) {
        PrepareQ0Row(type, w[r].data(), n_blocks, u.data() + r * 32 * n_blocks, d.data() + r * n_blocks);
        rows[r] = Q0Row{u.data() + r * 32 * n_blocks, d.data() + r * n_blocks};
      }
      rows[3] = rows[1];
      const int row_of[4] = {0, 1, 2, 1};
      for (int n_tokens : {1, 2, 3, 8, 9}) {
        const int64_t a_bytes = ActivationRowBytes(ActivationFormat::kQ8_0, cols);
        std::vector<uint8_t> act(static_cast<size_t>(n_tokens * a_bytes));
        const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
        for (int t = 0; t < n_tokens; ++t) {
          QuantizeActivations(ActivationFormat::kQ8_0, x.data() + t * cols, cols, act.data() + t * a_bytes);
        }
        Q0Tokens tokens;
        PairQ0Tokens(type, act.data(), a_bytes, n_tokens, n_blocks, &tokens);
        ASSERT_EQ(tokens.n_token_pairs, (n_tokens + 1) / 2);
        for (Int8Kernel kernel : RunnableInt8Kernels()) {
          // The row path, straight from the stored rows (the three, then the first again).
          std::vector<uint8_t> stored;
          for (int r : row_of) stored.insert(stored.end(), w[r].begin(), w[r].end());
          const int64_t w_bytes = n_blocks * TraitsOf(type).block_bytes;
          std::vector<float> y(static_cast<size_t>(4 * n_tokens));
          DotQ0Rows(type, stored.data(), w_bytes, 4, tokens, y.data(), 4, kernel);
          for (int t = 0; t < n_tokens; ++t) {
            for (int r = 0; r < 4; ++r) {
              const float want = LlamaCppDot(type, w[row_of[r]].data(),
                                             reinterpret_cast<const BlockQ8_0*>(act.data() + t * a_bytes), n_blocks);
              ASSERT_EQ(y[t * 4 + r], want) << TraitsOf(type).name << " rows " << Int8KernelName(kernel) << " blocks "
                                            << n_blocks << " token " << t << " row " << r;
            }
          }
          for (int n_h = 1; n_h <= 4; ++n_h) {
            for (int h0 = 0; h0 + n_h <= tokens.n_token_pairs; ++h0) {
              float out[4][8];
              DotQ0Tile(type, rows, tokens, h0, n_h, out, kernel);
              for (int r = 0; r < 4; ++r) {
                for (int k = 0; k < 2 * n_h; ++k) {
                  const int t = std::min(2 * h0 + k, n_tokens - 1);
                  const uint8_t* at = act.data() + t * a_bytes;
                  const float want =
                      LlamaCppDot(type, w[row_of[r]].data(), reinterpret_cast<const BlockQ8_0*>(at), n_blocks);
                  ASSERT_EQ(out[r][k], want) << TraitsOf(type).name << " " << Int8KernelName(kernel) << " blocks "
                                             << n_blocks << " token " << t << " row " << r;
                  ASSERT_EQ(VecDotQ8(type, w[row_of[r]].data(), at, cols), want) << TraitsOf(type).name;
                  ASSERT_EQ(VecDotQ8Reference(type, w[row_of[r]].data(), at, cols), want) << TraitsOf(type).name;
                }
              }
            }
          }
        }
        
      }
    }
  }
}

// MatMul's outputs for a token are the same bits whatever else is in the batch (Q8_0: one
// token alone and a few take DotQ0Rows, more DotQ0Tile; Q5_0: the int8 tile's paths), with
// and without a pool, on a block count that is not a multiple of two.
TEST(Q0GemmTest, MatMulGivesEveryTokenItsOwnBits) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0}) {
    for (int64_t cols : {96, 512}) {
      const int64_t rows = 27;
      const std::vector<uint8_t> data = RandomBlocks(type, rows * cols / 32, rng);
      const WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
      const int64_t n_tokens = 21;
      const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
      std::vector<float> alone(static_cast<size_t>(n_tokens * rows));
      for (int64_t t = 0; t < n_tokens; ++t) MatMul(w, x.data() + t * cols, 1, alone.data() + t * rows, nullptr);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        for (int64_t n : {2, 3, 8, 21}) {
          std::vector<float> got(static_cast<size_t>(n * rows));
          MatMul(w, x.data(), n, got.data(), p);
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_EQ(got[i], alone[i]) << TraitsOf(type).name << " cols " << cols << " batch " << n << " token "
                                        << i / rows << " row " << i % rows;
          }
        }
      }
    }
  }
}

// MatMul sums Q8_0 / Q5_0 in llama.cpp's order exactly where TANDEM_LLAMA_ORDER says
// (ctest runs this suite under the default, `none` and `q8_0,q5_0`), else in the int8
// tile's order, which differs in last bits.
TEST(Q0GemmTest, MatMulFollowsTheLlamaOrderSetting) {
  const char* env = std::getenv("TANDEM_LLAMA_ORDER");
  const std::string setting = env != nullptr ? env : "q8_0";
  EXPECT_EQ(LlamaCppOrderTypes(), setting);
  std::mt19937 rng(21);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0}) {
    const bool want_llama = setting.find(type == TensorType::kQ8_0 ? "q8_0" : "q5_0") != std::string::npos;
    EXPECT_EQ(SumsInLlamaCppOrder(type), want_llama) << TraitsOf(type).name;
    const int64_t rows = 64, cols = 512, n_tokens = 5;
    const std::vector<uint8_t> data = RandomBlocks(type, rows * cols / 32, rng);
    const int64_t row_bytes = *RowBytes(type, cols);
    const WeightMatrix w{type, data.data(), rows, cols, row_bytes};
    const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    std::vector<float> y(static_cast<size_t>(n_tokens * rows));
    MatMul(w, x.data(), n_tokens, y.data(), nullptr);
    const int64_t a_bytes = ActivationRowBytes(ActivationFormat::kQ8_0, cols);
    std::vector<uint8_t> act(static_cast<size_t>(a_bytes));
    int same = 0;
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantizeActivations(ActivationFormat::kQ8_0, x.data() + t * cols, cols, act.data());
      for (int64_t r = 0; r < rows; ++r) {
        same += y[t * rows + r] == LlamaCppDot(type, data.data() + r * row_bytes,
                                                reinterpret_cast<const BlockQ8_0*>(act.data()), cols / 32);
      }
    }
    if (want_llama) {
      EXPECT_EQ(same, rows * n_tokens) << TraitsOf(type).name;
    } else {
      EXPECT_LT(same, rows * n_tokens) << TraitsOf(type).name;
    }
  }
}

}  // namespace
}  // namespace tandem
