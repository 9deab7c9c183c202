// Checks the reference dequantizers bit-for-bit against an independent implementation:
// tools/make_fixtures.py writes types.gguf with, for each type T, a tensor `t` of random
// blocks and an F32 tensor `t.expected` holding gguf-py's dequantization of it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/dequant.h"
#include "model/gguf_file.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

class DequantGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = GgufFile::Open(FixturePath("types.gguf"));
    ASSERT_TRUE(file.ok()) << file.status().ToString()
                           << " (run: python3 tools/make_fixtures.py build/fixtures)";
    file_ = std::move(file).value();
  }

  // Dequantizes tensor `name` row by row and compares the bits with `name.expected`.
  void ExpectMatchesGolden(const std::string& name, TensorType want_type) {
    const GgufTensorInfo* t = file_->FindTensor(name);
    const GgufTensorInfo* golden = file_->FindTensor(name + ".expected");
    ASSERT_NE(t, nullptr) << name;
    ASSERT_NE(golden, nullptr) << name << ".expected";
    ASSERT_EQ(t->type, want_type) << name;
    ASSERT_EQ(golden->type, TensorType::kF32);
    ASSERT_EQ(t->num_elements, golden->num_elements);
    ASSERT_TRUE(CanDequantize(t->type));

    const int64_t row_elems = t->row_length();
    const int64_t row_bytes = *RowBytes(t->type, row_elems);
    std::vector<float> got(static_cast<size_t>(t->num_elements));
    for (int64_t r = 0; r < t->num_rows(); ++r) {
      DequantizeRow(t->type, t->data + r * row_bytes, got.data() + r * row_elems, row_elems);
    }
    std::vector<float> want(got.size());
    std::memcpy(want.data(), golden->data, want.size() * sizeof(float));
    int64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      if (a != b && ++mismatches <= 5) {
        ADD_FAILURE() << name << "[" << i << "]: got " << got[i] << " want " << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  }

  std::unique_ptr<GgufFile> file_;
};

TEST_F(DequantGoldenTest, F32) { ExpectMatchesGolden("f32", TensorType::kF32); }
TEST_F(DequantGoldenTest, F16) { ExpectMatchesGolden("f16", TensorType::kF16); }
TEST_F(DequantGoldenTest, BF16) { ExpectMatchesGolden("bf16", TensorType::kBF16); }
TEST_F(DequantGoldenTest, Q4_0) { ExpectMatchesGolden("q4_0", TensorType::kQ4_0); }
TEST_F(DequantGoldenTest, Q4_1) { ExpectMatchesGolden("q4_1", TensorType::kQ4_1); }
TEST_F(DequantGoldenTest, Q5_0) { ExpectMatchesGolden("q5_0", TensorType::kQ5_0); }
TEST_F(DequantGoldenTest, Q5_1) { ExpectMatchesGolden("q5_1", TensorType::kQ5_1); }
TEST_F(DequantGoldenTest, Q8_0) { ExpectMatchesGolden("q8_0", TensorType::kQ8_0); }
TEST_F(DequantGoldenTest, Q2_K) { ExpectMatchesGolden("q2_k", TensorType::kQ2_K); }
TEST_F(DequantGoldenTest, Q3_K) { ExpectMatchesGolden("q3_k", TensorType::kQ3_K); }
TEST_F(DequantGoldenTest, Q4_K) { ExpectMatchesGolden("q4_k", TensorType::kQ4_K); }
TEST_F(DequantGoldenTest, Q5_K) { ExpectMatchesGolden("q5_k", TensorType::kQ5_K); }
TEST_F(DequantGoldenTest, Q6_K) { ExpectMatchesGolden("q6_k", TensorType::kQ6_K); }

// QuantizeRowQ8_0 gives the same bytes as gguf-py's quantizer (itself bit-exact with
// ggml's quantize_row_q8_0_ref) on `q8_0.source`.
TEST_F(DequantGoldenTest, QuantizeQ8_0MatchesReferenceBytes) {
  const GgufTensorInfo* src = file_->FindTensor("q8_0.source");
  const GgufTensorInfo* want = file_->FindTensor("q8_0.quantized");
  ASSERT_NE(src, nullptr);
  ASSERT_NE(want, nullptr);
  ASSERT_EQ(src->type, TensorType::kF32);
  ASSERT_EQ(want->type, TensorType::kQ8_0);
  ASSERT_EQ(src->num_elements, want->num_elements);
  std::vector<float> x(static_cast<size_t>(src->num_elements));
  std::memcpy(x.data(), src->data, x.size() * sizeof(float));
  std::vector<uint8_t> got(want->size_bytes);
  QuantizeRowQ8_0(x.data(), got.data(), src->num_elements);
  ASSERT_EQ(got.size(), want->size_bytes);
  EXPECT_EQ(std::memcmp(got.data(), want->data, got.size()), 0);
}

}  // namespace
}  // namespace tandem
