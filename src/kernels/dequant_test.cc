#include "kernels/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tandem {
namespace {

constexpr uint16_t kFp16One = 0x3c00;   // 1.0
constexpr uint16_t kFp16Half = 0x3800;  // 0.5
constexpr uint16_t kFp16Two = 0x4000;   // 2.0

template <typename Block>
std::vector<float> Dequant(TensorType type, const Block& block) {
  std::vector<float> out(static_cast<size_t>(TraitsOf(type).block_elems));
  DequantizeRow(type, &block, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(DequantTest, CanDequantizeListsTheSupportedTypes) {
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ4_0,
                       TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0,
                       TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K,
                       TensorType::kQ6_K, TensorType::kQ5_0x2, TensorType::kQ4_0x2}) {
    EXPECT_TRUE(CanDequantize(t)) << TraitsOf(t).name;
  }
  EXPECT_FALSE(CanDequantize(TensorType::kQ8_1));
  EXPECT_FALSE(CanDequantize(TensorType::kQ8_K));
  EXPECT_FALSE(CanDequantize(TensorType::kI32));
}

// The repacked in-memory layouts have traits (64 values per pair of blocks, the file
// type's bytes per row) but are no file type id: a GGUF tensor cannot claim one.
TEST(DequantTest, InMemoryLayoutsAreNoFileTypes) {
  EXPECT_EQ(TraitsOf(TensorType::kQ5_0x2).block_bytes, 44);
  EXPECT_EQ(TraitsOf(TensorType::kQ4_0x2).block_elems, 64);
  EXPECT_EQ(*RowBytes(TensorType::kQ5_0x2, 640), *RowBytes(TensorType::kQ5_0, 640));
  EXPECT_EQ(*RowBytes(TensorType::kQ4_0x2, 640), *RowBytes(TensorType::kQ4_0, 640));
  EXPECT_FALSE(RowBytes(TensorType::kQ5_0x2, 96).has_value());
  EXPECT_FALSE(GetTensorTypeTraits(static_cast<uint32_t>(TensorType::kQ5_0x2)).has_value());
  EXPECT_FALSE(GetTensorTypeTraits(static_cast<uint32_t>(TensorType::kQ4_0x2)).has_value());
  EXPECT_TRUE(GetTensorTypeTraits(static_cast<uint32_t>(TensorType::kQ5_0)).has_value());
}

TEST(DequantDeathTest, RejectsUnsupportedTypeAndPartialBlocks) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> out(256);
  EXPECT_DEATH(DequantizeRow(TensorType::kQ8_1, buf.data(), out.data(), 32), "no dequantizer");
  EXPECT_DEATH(DequantizeRow(TensorType::kQ4_K, buf.data(), out.data(), 128), "multiple");
}

TEST(DequantTest, Q4_0HandBuiltBlock) {
  BlockQ4_0 b{};
  b.d = kFp16Half;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequant(TensorType::kQ4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
  }
}

TEST(DequantTest, Q5_1HandBuiltBlockUsesHighBits) {
  BlockQ5_1 b{};
  b.d = kFp16Two;
  b.m = kFp16One;
  const uint32_t qh = 0x80000001u;  // high bit of value 0 and value 31
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x21;  // low nibble 1, high nibble 2
  const std::vector<float> y = Dequant(TensorType::kQ5_1, b);
  EXPECT_EQ(y[0], 17 * 2.0f + 1.0f);
  EXPECT_EQ(y[1], 1 * 2.0f + 1.0f);
  EXPECT_EQ(y[16], 2 * 2.0f + 1.0f);
  EXPECT_EQ(y[31], 18 * 2.0f + 1.0f);
}

TEST(DequantTest, Q8_0HandBuiltBlock) {
  BlockQ8_0 b{};
  b.d = kFp16Two;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const std::vector<float> y = Dequant(TensorType::kQ8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 2.0f);
}

TEST(DequantTest, Q4_KHandBuiltBlock) {
  BlockQ4_K b{};
  b.d = kFp16One;
  b.dmin = kFp16Half;
  // Sub-block 0: scale 3, min 2. Sub-block 5: scale 0x2A = 42 (low nibble 0xA from
  // scales[9], top bits 0b10 from scales[1] >> 6), min 0x31 = 49 (nibble 1 from
  // scales[9] >> 4, top bits 0b11 from scales[5] >> 6).
  b.scales[0] = 3;
  b.scales[4] = 2;
  b.scales[1] = 0x80;
  b.scales[5] = 0xC0;
  b.scales[9] = 0x1A;
  for (int l = 0; l < 32; ++l) b.qs[l] = static_cast<uint8_t>(l & 0x0F);   // sub-block 0
  for (int l = 0; l < 32; ++l) b.qs[64 + l] = static_cast<uint8_t>(0xF0);  // sub-block 5
  const std::vector<float> y = Dequant(TensorType::kQ4_K, b);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[l], 3.0f * (l & 0x0F) - 1.0f);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[160 + l], 42.0f * 15 - 24.5f);
}

TEST(DequantTest, Q6_KHandBuiltBlock) {
  BlockQ6_K b{};
  b.d = kFp16Half;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  // Value 0: ql[0] low nibble 5, qh[0] bits 0-1 = 3 -> q = 0x35 - 32 = 21.
  // Value 96: ql[32] high nibble 0xF, qh[0] bits 6-7 = 0 -> q = 15 - 32 = -17.
  b.ql[0] = 0x05;
  b.ql[32] = 0xF0;
  b.qh[0] = 0x03;
  const std::vector<float> y = Dequant(TensorType::kQ6_K, b);
  EXPECT_EQ(y[0], 0.5f * -8 * 21);
  EXPECT_EQ(y[96], 0.5f * -2 * -17);  // scale index 6
  EXPECT_EQ(y[1], 0.5f * -8 * -32);   // all-zero quants decode to -32
}

// Dequantizing from an odd address gives the same values as from an aligned one.
TEST(DequantTest, AcceptsUnalignedSource) {
  std::mt19937 rng(7);
  for (TensorType t :
       {TensorType::kF16, TensorType::kBF16, TensorType::kQ4_0, TensorType::kQ5_0,
        TensorType::kQ8_0, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ6_K}) {
    const TensorTypeTraits tr = TraitsOf(t);
    const int64_t n = 256;
    const int64_t bytes = *RowBytes(t, n);
    std::vector<uint8_t> buf(static_cast<size_t>(bytes) + 1);
    for (auto& v : buf) v = static_cast<uint8_t>(rng() & 0x3b);  // keeps fp16 fields finite
    std::vector<float> a(n), b(n);
    std::vector<uint8_t> aligned(buf.begin() + 1, buf.end());
    DequantizeRow(t, aligned.data(), a.data(), n);
    DequantizeRow(t, buf.data() + 1, b.data(), n);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << tr.name;
  }
}

TEST(QuantizeQ8_0Test, RoundTripErrorIsWithinHalfAStep) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 32 * 64;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = normal(rng) * ((i / 32) % 7 + 1) * 0.1f;
  std::vector<BlockQ8_0> q(n / 32);
  QuantizeRowQ8_0(x.data(), q.data(), n);
  std::vector<float> y(n);
  DequantizeRow(TensorType::kQ8_0, q.data(), y.data(), n);
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const float d = amax / 127;
    // Half a step from rounding q, plus |q| <= 127 times the fp16 rounding error of d
    // (relative 2^-11).
    const float tol = d * (0.5f + 127.0f / 2048.0f) * 1.0001f;
    for (int j = 0; j < 32; ++j) {
      EXPECT_LE(std::fabs(x[blk * 32 + j] - y[blk * 32 + j]), tol) << blk << " " << j;
    }
  }
}

TEST(QuantizeQ8_0Test, ZerosAndRoundingHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  BlockQ8_0 b;
  QuantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);

  // amax 127 -> d = 1 exactly; x = +-2.5 must round away from zero to +-3.
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = -127.0f;
  QuantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, kFp16One);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], -127);
}

}  // namespace
}  // namespace tandem
