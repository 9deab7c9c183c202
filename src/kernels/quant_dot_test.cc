#include "kernels/quant_dot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"
#include "kernels/matmul.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

// Random but valid blocks of `type`: random bytes with a sane fp16 scale at offset 0.
std::vector<uint8_t> RandomRow(TensorType type, int64_t n_elems, std::mt19937& rng) {
  const int64_t bytes = *RowBytes(type, n_elems);
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  std::vector<uint8_t> row(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  // Offsets of the fp16 scale fields inside each block (d, and dmin for Q4_K).
  std::vector<int64_t> fields = {0};
  if (type == TensorType::kQ4_K || type == TensorType::kQ5_K) fields = {0, 2};
  if (type == TensorType::kQ4_1 || type == TensorType::kQ5_1) fields = {0, 2};
  if (type == TensorType::kQ2_K) fields = {80, 82};
  if (type == TensorType::kQ3_K) fields = {108};
  if (type == TensorType::kQ6_K) fields = {208};
  for (int64_t off = 0; off < bytes; off += block_bytes) {
    for (int64_t f : fields) {
      uint16_t d = Fp32ToFp16(scale(rng));
      std::memcpy(&row[off + f], &d, 2);
    }
  }
  return row;
}

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// x as the kernels see it: quantized to (or rounded in) the activation format, expanded.
std::vector<float> RoundTripActivations(ActivationFormat format, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(ActivationRowBytes(format, n));
  QuantizeActivations(format, x.data(), n, q.data());
  std::vector<float> out(n);
  if (format == ActivationFormat::kQ8_0) {
    DequantizeRow(TensorType::kQ8_0, q.data(), out.data(), n);
  } else if (format == ActivationFormat::kQ8_K) {
    const auto* blocks = reinterpret_cast<const BlockQ8_K*>(q.data());
    for (int64_t i = 0; i < n; ++i) out[i] = blocks[i / 256].d * blocks[i / 256].qs[i % 256];
  } else if (format == ActivationFormat::kQ8_1) {
    const auto* blocks = reinterpret_cast<const BlockQ8_1*>(q.data());
    for (int64_t i = 0; i < n; ++i)
      out[i] = Fp16ToFp32(blocks[i / 32].d) * blocks[i / 32].qs[i % 32];
  } else {
    std::memcpy(out.data(), q.data(), n * sizeof(float));
  }
  return out;
}

class QuantDotTest : public ::testing::TestWithParam<TensorType> {};

TEST_P(QuantDotTest, VectorPathMatchesReferenceAndFloatDot) {
  const TensorType type = GetParam();
  std::mt19937 rng(1234);
  for (int64_t n : {32, 64, 640, 2048}) {
    if (n % TraitsOf(type).block_elems != 0) continue;
    std::vector<uint8_t> w = RandomRow(type, n, rng);
    std::vector<float> x = RandomFloats(n, rng);
    const ActivationFormat format = ActivationFormatFor(type);
    std::vector<uint8_t> xq(ActivationRowBytes(format, n));
    QuantizeActivations(format, x.data(), n, xq.data());
    const float ref = VecDotQ8Reference(type, w.data(), xq.data(), n);
    const float fast = VecDotQ8(type, w.data(), xq.data(), n);
    EXPECT_NEAR(fast, ref, 1e-4f * (1.0f + std::fabs(ref))) << "n=" << n;
    // Against float math on the dequantized weights: only activation rounding differs
    // (Q8_0 keeps ~2 significant digits per value).
    std::vector<float> wf(n), xf(n);
    DequantizeRow(type, w.data(), wf.data(), n);
    xf = RoundTripActivations(format, x);
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wf[i]) * xf[i];
    EXPECT_NEAR(ref, exact, 1e-3 * (1.0 + std::fabs(exact))) << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantDotTest,
                         ::testing::Values(TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0,
                                           TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kQ4_1,
                                           TensorType::kQ5_1, TensorType::kQ2_K, TensorType::kQ3_K,
                                           TensorType::kQ5_K));

// Q4_K sums in llama.cpp's repack order (DotQ4_KReference), Q5_K and Q6_K in ggml's
// vec_dot orders (DotQ5_KReference, DotQ6_KReference) on every path, bit for bit: the
// vector dot here (the reference itself at the scalar level), and through
// FourRowDotEqualsSingleRowDotBitForBit the multi-token and paired forms.
TEST(QuantDotTest, KQuantVectorDotsEqualLlamaOrderReferencesBitForBit) {
  std::mt19937 rng(4242);
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    for (int64_t n : {256, 768, 2048, 5120}) {
      for (int trial = 0; trial < 8; ++trial) {
        std::vector<uint8_t> w = RandomRow(type, n, rng);
        std::vector<float> x = RandomFloats(n, rng);
        std::vector<uint8_t> xq(ActivationRowBytes(ActivationFormat::kQ8_K, n));
        QuantizeActivations(ActivationFormat::kQ8_K, x.data(), n, xq.data());
        EXPECT_EQ(VecDotQ8(type, w.data(), xq.data(), n), VecDotQ8Reference(type, w.data(), xq.data(), n))
            << TraitsOf(type).name << " n=" << n << " trial " << trial;
      }
    }
  }
}

// The K-quant kernels' vector unpack of a Q4_K / Q5_K super-block's 6-bit scales and mins
// gives ScaleMinK4's values for every bit pattern of the 12 bytes (random blocks, and
// each byte all-ones / zero).
TEST(QuantDotTest, VectorScaleMinUnpackEqualsScaleMinK4) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "the vector unpack needs AVX2";
  std::mt19937 rng(77);
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t bytes[16];
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
    if (trial < 12) {
      std::memset(bytes, 0, sizeof(bytes));
      bytes[trial] = 0xFF;
    }
    alignas(16) uint8_t got[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(got), UnpackScalesMinsK4(bytes));
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ScaleMinK4(j, bytes, &sc, &m);
      EXPECT_EQ(got[j], sc) << "scale " << j << " trial " << trial;
      EXPECT_EQ(got[8 + j], m) << "min " << j << " trial " << trial;
    }
  }
}

TEST(QuantDotTest, FourRowDotEqualsSingleRowDotBitForBit) {
  std::mt19937 rng(77);
  for (TensorType type :
       {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kQ8_0}) {
    const int64_t n = 1024;
    std::vector<uint8_t> w = RandomRow(type, n, rng);
    const ActivationFormat format = ActivationFormatFor(type);
    std::vector<std::vector<uint8_t>> a(4, std::vector<uint8_t>(ActivationRowBytes(format, n)));
    const void* rows[4];
    for (int t = 0; t < 4; ++t) {
      std::vector<float> x = RandomFloats(n, rng);
      QuantizeActivations(format, x.data(), n, a[t].data());
      rows[t] = a[t].data();
    }
    float out[4];
    VecDotQ8x4(type, w.data(), rows, n, out);
    for (int t = 0; t < 4; ++t)
      EXPECT_EQ(out[t], VecDotQ8(type, w.data(), rows[t], n)) << TraitsOf(type).name;
    const void* eight[8] = {rows[1], rows[0], rows[2], rows[3], rows[3], rows[2], rows[0], rows[1]};
    float out8[8];
    VecDotQ8x8(type, w.data(), eight, n, out8);
    for (int t = 0; t < 8; ++t)
      EXPECT_EQ(out8[t], VecDotQ8(type, w.data(), eight[t], n)) << TraitsOf(type).name << " of 8";
    // MatMul's avx512 form: 9 rows paired once (the fifth pair repeats row 8).
    if (HasPairedQ8KDot(type)) {
      const int64_t row_bytes = ActivationRowBytes(format, n);
      std::vector<uint8_t> nine(9 * row_bytes);
      for (int t = 0; t < 9; ++t) {
        std::vector<float> x = RandomFloats(n, rng);
        QuantizeActivations(format, x.data(), n, nine.data() + t * row_bytes);
      }
      PairedQ8K paired;
      PairQ8KRows(nine.data(), row_bytes, 9, n / 256, &paired);
      ASSERT_EQ(paired.n_token_pairs, 5);
      for (int h0 : {0, 1}) {
        VecDotQ8KPaired8(type, w.data(), paired, h0, out8);
        for (int k = 0; k < 8; ++k) {
          const int t = std::min(2 * h0 + k, 8);
          EXPECT_EQ(out8[k], VecDotQ8(type, w.data(), nine.data() + t * row_bytes, n))
              << TraitsOf(type).name << " paired, token " << 2 * h0 + k;
        }
      }
      // Fewer pairs per call (a MatMul's last 1-7 tokens), the last pair of the nine
      // holding token 8 twice.
      for (int np = 1; np <= 4; ++np) {
        for (int h0 = 0; h0 + np <= 5; ++h0) {
          VecDotQ8KPaired(type, w.data(), paired, h0, np, out8);
          for (int k = 0; k < 2 * np; ++k) {
            const int t = std::min(2 * h0 + k, 8);
            EXPECT_EQ(out8[k], VecDotQ8(type, w.data(), nine.data() + t * row_bytes, n))
                << TraitsOf(type).name << " " << np << " pairs from " << h0 << ", token " << 2 * h0 + k;
          }
        }
      }
    }
  }
}

// The vector quantizers give exactly the values of the scalar formulas (ggml's
// quantize_row_q8_K_ref, and the x86 run-time Q8_0 quantizer), on random rows with
// positive and negative extremes, exact .5 ties and an all-zero block.
TEST(QuantizeTest, VectorQuantizersMatchScalarFormulas) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> x = RandomFloats(512, rng);
    x[7 + trial] = trial % 2 ? 5.0f : -5.0f;
    if (trial == 3) std::fill(x.begin() + 256, x.end(), 0.0f);
    std::vector<BlockQ8_K> k(2);
    QuantizeRowQ8_K(x.data(), k.data(), 512);
    for (int b = 0; b < 2; ++b) {
      float max = 0, amax = 0;
      for (int j = 0; j < 256; ++j) {
        if (std::fabs(x[256 * b + j]) > amax) {
          amax = std::fabs(x[256 * b + j]);
          max = x[256 * b + j];
        }
      }
      const float iscale = amax == 0 ? 0.0f : -127.0f / max;
      for (int j = 0; j < 256; ++j) {
        const int want =
            amax == 0 ? 0
                      : std::min(127, static_cast<int>(std::nearbyint(iscale * x[256 * b + j])));
        ASSERT_EQ(k[b].qs[j], want) << trial << " " << b << " " << j;
      }
    }
    std::vector<BlockQ8_0> q(16);
    QuantizeActivations(ActivationFormat::kQ8_0, x.data(), 512, q.data());
    for (int b = 0; b < 16; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[32 * b + j]));
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      ASSERT_EQ(q[b].d, Fp32ToFp16(amax / 127.0f));
      for (int j = 0; j < 32; ++j) {
        ASSERT_EQ(q[b].qs[j], static_cast<int8_t>(std::nearbyint(x[32 * b + j] * id)))
            << trial << " " << b;
      }
    }
  }
}

TEST(QuantizeQ8KTest, BlockSumsAndScale) {
  std::mt19937 rng(5);
  std::vector<float> x = RandomFloats(512, rng);
  x[3] = -9.0f;  // the signed extreme sets the scale
  std::vector<BlockQ8_K> q(2);
  QuantizeRowQ8_K(x.data(), q.data(), 512);
  // iscale = -127 / max: the extreme maps to -127 and d = 1 / iscale is positive.
  EXPECT_EQ(q[0].qs[3], -127);
  EXPECT_FLOAT_EQ(q[0].d, 9.0f / 127.0f);
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * j + i];
      EXPECT_EQ(q[b].bsums[j], sum);
    }
}

// MatMul (every path, threaded or not) against a naive dequantize-and-dot reference.
TEST(MatMulTest, AllTypesMatchNaiveReference) {
  std::mt19937 rng(99);
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ5_0,
        TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_1, TensorType::kQ2_K,
        TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    for (const int64_t n_tokens : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{17}}) {
      const int64_t rows = 37, cols = 512;
      std::vector<uint8_t> data;
      if (type == TensorType::kF32) {
        std::vector<float> f = RandomFloats(rows * cols, rng);
        data.assign(reinterpret_cast<uint8_t*>(f.data()),
                    reinterpret_cast<uint8_t*>(f.data() + f.size()));
      } else if (type == TensorType::kF16 || type == TensorType::kBF16) {
        std::vector<float> f = RandomFloats(rows * cols, rng);
        data.resize(rows * cols * 2);
        for (int64_t i = 0; i < rows * cols; ++i) {
          uint16_t h = type == TensorType::kF16 ? Fp32ToFp16(f[i]) : Fp32ToBf16(f[i]);
          std::memcpy(&data[i * 2], &h, 2);
        }
      } else {
        data = RandomRow(type, rows * cols, rng);
      }
      WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
      std::vector<float> x = RandomFloats(n_tokens * cols, rng);
      std::vector<float> xr;  // the activations after the format's rounding
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::vector<float> row(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        std::vector<float> r = RoundTripActivations(ActivationFormatFor(type), row);
        xr.insert(xr.end(), r.begin(), r.end());
      }
      std::vector<float> want(n_tokens * rows);
      std::vector<float> wrow(cols);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(type, data.data() + r * w.row_bytes, wrow.data(), cols);
        for (int64_t t = 0; t < n_tokens; ++t) {
          double s = 0;
          for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(wrow[c]) * xr[t * cols + c];
          want[t * rows + r] = static_cast<float>(s);
        }
      }
      ThreadPool pool(2);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> got(n_tokens * rows);
        MatMul(w, x.data(), n_tokens, got.data(), p);
        for (int64_t i = 0; i < n_tokens * rows; ++i) {
          // Same activations on both sides: only the summation order differs.
          const float tol = 1e-3f * (1.0f + std::fabs(want[i]));
          ASSERT_NEAR(got[i], want[i], tol)
              << TraitsOf(type).name << " n_tokens=" << n_tokens << " i=" << i;
        }
      }
    }
  }
}

// The prefill tile's activation layout holds exactly the values and scales of
// QuantizeActivations(kQ8_0) at TilePosition, scale lanes [d0 d1 d0 d1 ...] and the
// corrections offset * (block sum) in lanes 0 and 1 of each pair.
TEST(Int8TileTest, ActivationLayoutMatchesQ8_0Quantization) {
  std::mt19937 rng(5);
  const int64_t cols = 640;
  std::vector<float> x = RandomFloats(cols, rng);
  for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // an all-zero block: scale 0, values 0
  x[3] = 1e-30f;
  std::vector<BlockQ8_0> blocks(cols / 32);
  QuantizeActivations(ActivationFormat::kQ8_0, x.data(), cols, blocks.data());
  std::vector<int8_t> q(cols);
  std::vector<float> d(cols / 8);
  std::vector<int32_t> corr(cols / 8);
  PrepareTileActivationRow(x.data(), cols, 16, q.data(), d.data(), corr.data());
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int64_t pos = 64 * (b / 2) + TilePosition(static_cast<int>(32 * (b % 2) + j));
      ASSERT_EQ(q[pos], blocks[b].qs[j]) << b << " " << j;
      sum += blocks[b].qs[j];
    }
    for (int64_t lane = 8 * (b / 2) + b % 2; lane < 8 * (b / 2 + 1); lane += 2) {
      EXPECT_EQ(d[lane], Fp16ToFp32(blocks[b].d)) << lane;
    }
    EXPECT_EQ(corr[8 * (b / 2) + b % 2], 16 * sum);
    EXPECT_EQ(corr[8 * (b / 2) + 2 + b % 2], 0);
  }
}

// TilePosition is a permutation of a pair's 64 bytes in which each 4-byte group of a
// block stays together, and the int32 lane j (bytes 4j..4j+3 of either 32-byte half)
// only holds values of block j % 2.
TEST(Int8TileTest, TilePositionIsAPermutationKeepingLanesInOneBlock) {
  std::vector<int> seen(64, 0);
  for (int i = 0; i < 64; ++i) {
    const int pos = TilePosition(i);
    ASSERT_GE(pos, 0);
    ASSERT_LT(pos, 64);
    ++seen[pos];
    EXPECT_EQ(pos % 4, i % 4) << i;
    EXPECT_EQ((pos % 32) / 4 % 2, i / 32) << i;
  }
  for (int n : seen) EXPECT_EQ(n, 1);
}

// The tile (vector path here) against VecDotQ8Reference on the original blocks: same
// integers, float order differs. Odd token count (a1 == a0) and a short last tile.
TEST(Int8TileTest, TileMatchesReferenceDot) {
  std::mt19937 rng(6);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0}) {
    const int64_t cols = 640;
    std::vector<uint8_t> w = RandomRow(type, 4 * cols, rng);
    const int64_t row_bytes = *RowBytes(type, cols);
    const int64_t w_stride = TileWeightRowBytes(type, cols);
    std::vector<uint8_t> wq(4 * w_stride);
    std::vector<float> wd(4 * cols / 8);
    TileOperand wt[4];
    for (int r = 0; r < 4; ++r) {
      PrepareTileWeightRow(type, w.data() + r * row_bytes, cols, wq.data() + r * w_stride,
                           wd.data() + r * cols / 8);
      wt[r] = TileOperand{wq.data() + r * w_stride, wd.data() + r * cols / 8, nullptr};
    }
    const int offset = Int8TileOffset(type);
    std::vector<float> x = RandomFloats(2 * cols, rng);
    std::vector<int8_t> aq(2 * cols);
    std::vector<float> ad(2 * cols / 8);
    std::vector<int32_t> ac(2 * cols / 8);
    for (int t = 0; t < 2; ++t) {
      PrepareTileActivationRow(x.data() + t * cols, cols, offset, aq.data() + t * cols,
                               ad.data() + t * cols / 8, ac.data() + t * cols / 8);
    }
    const TileOperand a0{aq.data(), ad.data(), ac.data()};
    const TileOperand a1{aq.data() + cols, ad.data() + cols / 8, ac.data() + cols / 8};
    float portable[4][2];
    const TileOperand both[2] = {a0, a1};
    DotInt8Tile4x2Scalar(offset, wt, both, cols / 64, portable);
    for (int t = 0; t < 2; ++t) {
      std::vector<BlockQ8_0> blocks(cols / 32);
      QuantizeActivations(ActivationFormat::kQ8_0, x.data() + t * cols, cols, blocks.data());
      for (int r = 0; r < 4; ++r) {
        const float want = VecDotQ8Reference(type, w.data() + r * row_bytes, blocks.data(), cols);
        ASSERT_NEAR(portable[r][t], want, 1e-4f * (1.0f + std::fabs(want)))
            << TraitsOf(type).name << " r " << r;
      }
    }
    // Every kernel this CPU runs gives the portable path's bits (machines without AVX2
    // run that one), in every form: the 4x2 and 4x4 tiles, one row, and the row-range
    // form (decode of a few sequences, groups of tokens sharing each decoded weight pair).
    for (Int8Kernel kernel : RunnableInt8Kernels()) {
      SCOPED_TRACE(Int8KernelName(kernel));
      float out[4][2], same[4][2], wide[4][4];
      DotInt8Tile4x2(offset, wt, a0, a1, cols / 64, out, kernel);
      DotInt8Tile4x2(offset, wt, a1, a1, cols / 64, same, kernel);
      const TileOperand four[4] = {a1, a0, a0, a1};
      DotInt8Tile4x4(offset, wt, four, cols / 64, wide, kernel);
      // MatMul's avx512 form: tokens paired once, 1..4 register pairs per call (7 tokens:
      // the last pair repeats token 6).
      float paired_out[4][8];
      if (kernel == Int8Kernel::kAvx512Vnni) {
        const TileOperand seven[7] = {a0, a1, a1, a0, a0, a1, a1};
        PairedTileTokens paired;
        PairTileTokens(seven, 7, cols / 64, false, &paired);
        ASSERT_EQ(paired.n_token_pairs, 4);
        for (int n_h = 1; n_h <= 4; ++n_h) {
          DotInt8TilePaired(offset, wt, paired, 0, n_h, paired_out);
          for (int r = 0; r < 4; ++r) {
            for (int k = 0; k < 2 * n_h && k < 7; ++k) {
              const int src = (k == 0 || k == 3 || k == 4) ? 0 : 1;  // a0 or a1
              ASSERT_EQ(paired_out[r][k], portable[r][src]) << "pairs " << n_h << " token " << k;
            }
          }
        }
        DotInt8TilePaired(offset, wt, paired, 3, 1, paired_out);  // the last pair alone
        for (int r = 0; r < 4; ++r) ASSERT_EQ(paired_out[r][0], portable[r][1]);
      }
      for (int t = 0; t < 2; ++t) {
        for (int r = 0; r < 4; ++r) {
          ASSERT_EQ(out[r][t], portable[r][t]) << TraitsOf(type).name << " r " << r;
          if (t == 1) {
            ASSERT_EQ(same[r][0], out[r][1]);
          }
          ASSERT_EQ(wide[r][t == 0 ? 1 : 0], out[r][t]);
          ASSERT_EQ(wide[r][t == 0 ? 2 : 3], out[r][t]);
          // One row alone gives the tile's bits (decode vs batched prefill).
          ASSERT_EQ(DotTileRow(type, w.data() + r * row_bytes, t == 0 ? a0 : a1, cols / 64, kernel),
                    out[r][t]);
          for (int n_tokens : {1, 2, 5, 6, 7, 8, 9, 16, 17}) {
            std::vector<TileOperand> tokens;
            for (int k = 0; k < n_tokens; ++k) tokens.push_back(k % 2 == 0 ? a0 : a1);
            std::vector<float> rows_out(static_cast<size_t>(n_tokens) * 4);
            DotTileRows(type, w.data(), row_bytes, 4, tokens.data(), n_tokens, cols / 64,
                        rows_out.data(), 4, kernel);
            for (int k = t; k < n_tokens; k += 2)
              ASSERT_EQ(rows_out[k * 4 + r], out[r][t]) << n_tokens << " " << k;
          }
        }
      }
    }
  }
  std::printf("int8 kernels compared:");
  for (Int8Kernel kernel : RunnableInt8Kernels()) std::printf(" %s", Int8KernelName(kernel));
  std::printf("\n");
}

// Q5_0 / Q4_0 rows repacked at load (Q5_0x2 / Q4_0x2) hold the same values and give the
// same bits in every int8 path: the prepared tile rows, DotTileRow(s) and MatMul.
TEST(Int8TileTest, RepackedRowsGiveTheSameValuesAndBits) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  for (TensorType type : {TensorType::kQ5_0, TensorType::kQ4_0}) {
    const TensorType packed_type = TileRepackedType(type);
    ASSERT_NE(packed_type, type);
    const int64_t rows = 7, cols = 640, n_pairs = cols / 64;
    const int64_t row_bytes = *RowBytes(type, cols);
    ASSERT_EQ(*RowBytes(packed_type, cols), row_bytes);
    std::vector<uint8_t> w = RandomRow(type, rows * cols, rng);
    std::vector<uint8_t> packed(w.size());
    for (int64_t r = 0; r < rows; ++r) {
      RepackRowForTile(type, w.data() + r * row_bytes, cols, packed.data() + r * row_bytes);
    }
    ASSERT_NE(packed, w);
    const int offset = Int8TileOffset(type);
    ASSERT_EQ(Int8TileOffset(packed_type), offset);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> want(cols), got(cols);
      DequantizeRow(type, w.data() + r * row_bytes, want.data(), cols);
      DequantizeRow(packed_type, packed.data() + r * row_bytes, got.data(), cols);
      ASSERT_EQ(got, want) << TraitsOf(type).name << " row " << r;
      std::vector<uint8_t> q_want(cols), q_got(cols);
      std::vector<float> d_want(cols / 8), d_got(cols / 8);
      PrepareTileWeightRow(type, w.data() + r * row_bytes, cols, q_want.data(), d_want.data());
      PrepareTileWeightRow(packed_type, packed.data() + r * row_bytes, cols, q_got.data(),
                           d_got.data());
      ASSERT_EQ(q_got, q_want);
      ASSERT_EQ(d_got, d_want);
    }
    const int n_tokens = 3;
    std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    std::vector<int8_t> aq(n_tokens * cols);
    std::vector<float> ad(n_tokens * cols / 8);
    std::vector<int32_t> ac(n_tokens * cols / 8);
    TileOperand a[n_tokens];
    for (int t = 0; t < n_tokens; ++t) {
      PrepareTileActivationRow(x.data() + t * cols, cols, offset, aq.data() + t * cols,
                               ad.data() + t * cols / 8, ac.data() + t * cols / 8);
      a[t] = TileOperand{aq.data() + t * cols, ad.data() + t * cols / 8, ac.data() + t * cols / 8};
    }
    std::vector<float> rows_want(n_tokens * rows), rows_got(n_tokens * rows);
    DotTileRows(type, w.data(), row_bytes, rows, a, n_tokens, n_pairs, rows_want.data(), rows);
    DotTileRows(packed_type, packed.data(), row_bytes, rows, a, n_tokens, n_pairs, rows_got.data(),
                rows);
    ASSERT_EQ(rows_got, rows_want);
    for (int t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(DotTileRow(packed_type, packed.data() + r * row_bytes, a[t], n_pairs),
                  rows_want[t * rows + r]);
      }
    }
    // MatMul: decode (1-3 tokens, row by row) and the tile (16), one thread and two.
    const WeightMatrix plain{type, w.data(), rows, cols, row_bytes};
    const WeightMatrix repacked{packed_type, packed.data(), rows, cols, row_bytes};
    for (int64_t tokens : {1, 3, 16}) {
      std::vector<float> xs = RandomFloats(tokens * cols, rng);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> want(tokens * rows), got(tokens * rows);
        MatMul(plain, xs.data(), tokens, want.data(), p);
        MatMul(repacked, xs.data(), tokens, got.data(), p);
        ASSERT_EQ(got, want) << TraitsOf(type).name << " tokens " << tokens;
      }
    }
  }
}

// Shapes the tile does not take (cols not a multiple of 64) use the per-row dots.
TEST(MatMulTest, Int8TypesWithOddBlockCountsMatchReference) {
  std::mt19937 rng(8);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0}) {
    const int64_t rows = 9, cols = 96, n_tokens = 8;
    std::vector<uint8_t> data = RandomRow(type, rows * cols, rng);
    WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
    std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    std::vector<float> got(n_tokens * rows);
    MatMul(w, x.data(), n_tokens, got.data(), nullptr);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<BlockQ8_0> blocks(cols / 32);
      QuantizeActivations(ActivationFormat::kQ8_0, x.data() + t * cols, cols, blocks.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float want =
            VecDotQ8Reference(type, data.data() + r * w.row_bytes, blocks.data(), cols);
        ASSERT_NEAR(got[t * rows + r], want, 1e-4f * (1.0f + std::fabs(want)));
      }
    }
  }
}

// No tokens (a step whose sequences need no logits): nothing is read or written, on
// every path (the LM head's row path at avx512 once read a token that was not there).
TEST(MatMulTest, NoTokensIsANoOp) {
  std::mt19937 rng(9);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0, TensorType::kQ4_K,
                          TensorType::kQ6_K, TensorType::kF16}) {
    for (int64_t rows : {int64_t{9}, int64_t{8192}}) {  // 8192 x 1024 Q8_0: a "large" matrix
      const int64_t cols = 1024;
      std::vector<uint8_t> data = RandomRow(type, rows * cols, rng);
      WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
      float sentinel = 7.0f;
      MatMul(w, nullptr, 0, &sentinel, nullptr);
      EXPECT_EQ(sentinel, 7.0f) << TraitsOf(type).name;
    }
  }
}

// A prepared input (MatMulInput: one preparation shared by several MatMuls, rows
// gathered, a range of rows taken) gives every token the bits MatMul gives its float row;
// an input prepared for one kind of weights refuses another.
TEST(MatMulTest, PreparedInputsGiveMatMulsBits) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                          TensorType::kQ5_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ5_K,
                          TensorType::kQ6_K}) {
    const int64_t rows = 40, cols = 512, n_tokens = 23;
    std::vector<uint8_t> data;
    if (type == TensorType::kF32) {
      std::vector<float> f = RandomFloats(rows * cols, rng);
      data.assign(reinterpret_cast<uint8_t*>(f.data()), reinterpret_cast<uint8_t*>(f.data() + f.size()));
    } else if (type == TensorType::kF16 || type == TensorType::kBF16) {
      data.resize(rows * cols * 2);
      std::vector<float> f = RandomFloats(rows * cols, rng);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t h = type == TensorType::kF16 ? Fp32ToFp16(f[i]) : Fp32ToBf16(f[i]);
        std::memcpy(&data[i * 2], &h, 2);
      }
    } else {
      data = RandomRow(type, rows * cols, rng);
    }
    const WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
    const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    // Rows gathered in another order, some twice: 17 rows (the paired 8-token paths
    // and a remainder).
    const std::vector<int64_t> pick = {5, 0, 22, 7, 7, 13, 1, 2, 3, 19, 20, 4, 6, 8, 9, 10, 11};
    const int64_t n = static_cast<int64_t>(pick.size());
    std::vector<float> gathered;
    for (int64_t r : pick) gathered.insert(gathered.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    MatMulInput all, some;
    all.Prepare(type, cols, x.data(), n_tokens, &pool);
    some.Gather(all, pick.data(), n);
    ASSERT_TRUE(some.Fits(type, cols));
    ASSERT_EQ(some.n_tokens(), n);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> want(n * rows), got(n * rows, -1.0f);
      MatMul(w, gathered.data(), n, want.data(), p);
      MatMul(w, some, 0, n, got.data(), p);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << TraitsOf(type).name;
      // A range of rows: rows [9, 17) of the gathered input.
      std::vector<float> want8(8 * rows), got8(8 * rows, -1.0f);
      MatMul(w, gathered.data() + 9 * cols, 8, want8.data(), p);
      MatMul(w, some, 9, 8, got8.data(), p);
      EXPECT_EQ(std::memcmp(want8.data(), got8.data(), want8.size() * 4), 0) << TraitsOf(type).name;
    }
  }
  // Several matrices over one input (q, k, v; gate, up), some sharing a preparation,
  // one in another kind, one read as floats: each output as its own MatMul's.
  {
    const int64_t cols = 512, n_tokens = 11;
    const TensorType types[] = {TensorType::kQ5_0, TensorType::kQ4_K, TensorType::kQ5_0, TensorType::kF32,
                                TensorType::kQ6_K};
    std::vector<std::vector<uint8_t>> data;
    std::vector<WeightMatrix> ws;
    for (TensorType type : types) {
      const int64_t rows = 24;
      if (type == TensorType::kF32) {
        std::vector<float> f = RandomFloats(rows * cols, rng);
        data.emplace_back(reinterpret_cast<uint8_t*>(f.data()), reinterpret_cast<uint8_t*>(f.data() + f.size()));
      } else {
        data.push_back(RandomRow(type, rows * cols, rng));
      }
      ws.push_back(WeightMatrix{type, data.back().data(), rows, cols, *RowBytes(type, cols)});
    }
    const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    std::vector<std::vector<float>> want(ws.size(), std::vector<float>(n_tokens * 24));
    std::vector<std::vector<float>> got(ws.size(), std::vector<float>(n_tokens * 24, -1.0f));
    for (size_t i = 0; i < ws.size(); ++i) MatMul(ws[i], x.data(), n_tokens, want[i].data(), &pool);
    MatMulSameInput({{&ws[0], got[0].data()},
                     {&ws[1], got[1].data()},
                     {&ws[2], got[2].data()},
                     {&ws[3], got[3].data()},
                     {&ws[4], got[4].data()}},
                    x.data(), n_tokens, &pool);
    for (size_t i = 0; i < ws.size(); ++i) {
      EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * 4), 0) << TraitsOf(types[i]).name;
    }
  }
  MatMulInput q8;
  std::vector<float> x = RandomFloats(2 * 512, rng);
  q8.Prepare(TensorType::kQ8_0, 512, x.data(), 2, nullptr);
  EXPECT_TRUE(q8.Fits(TensorType::kQ8_0, 512));
  EXPECT_FALSE(q8.Fits(TensorType::kQ4_0, 512));  // another tile offset
  EXPECT_FALSE(q8.Fits(TensorType::kQ4_K, 512));
  EXPECT_FALSE(q8.Fits(TensorType::kQ8_0, 256));
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// A long chunk runs in token blocks (matmul.cc TokenBlock: every weight tile against one
// block of tokens, then the next). Each token's outputs are those of a short call over
// a 4-aligned window holding it: blocks change which tokens share a cache, never which
// share an inner loop. Windows straddle the block edges of every path (int8 tile:
// 384-token blocks at 256 columns; Q8_K dots: 672; float rows: 192).
TEST(MatMulTest, TokenBlocksKeepEveryTokensBits) {
  std::mt19937 rng(11);
  const int64_t rows = 24, cols = 256, n_tokens = 1003;
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K,
                          TensorType::kQ6_K, TensorType::kF32}) {
    std::vector<uint8_t> data;
    if (type == TensorType::kF32) {
      std::vector<float> f = RandomFloats(rows * cols, rng);
      data.assign(reinterpret_cast<uint8_t*>(f.data()),
                  reinterpret_cast<uint8_t*>(f.data() + f.size()));
    } else {
      data = RandomRow(type, rows * cols, rng);
    }
    const WeightMatrix w{type, data.data(), rows, cols, *RowBytes(type, cols)};
    const std::vector<float> x = RandomFloats(n_tokens * cols, rng);
    ThreadPool pool(2);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> all(n_tokens * rows);
      MatMul(w, x.data(), n_tokens, all.data(), p);
      for (int64_t t0 : {0, 188, 380, 668, 984}) {
        const int64_t n = std::min<int64_t>(16, n_tokens - t0);
        std::vector<float> part(n * rows);
        MatMul(w, x.data() + t0 * cols, n, part.data(), p);
        for (int64_t i = 0; i < n * rows; ++i)
          ASSERT_EQ(all[t0 * rows + i], part[i])
              << TraitsOf(type).name << " token " << t0 + i / rows;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
