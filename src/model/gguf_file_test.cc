#include "model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tandem {
namespace {

// Builds GGUF byte images by hand so each field can be corrupted on purpose.
class GgufBuilder {
 public:
  GgufBuilder& U32(uint32_t v) { return Raw(&v, 4); }
  GgufBuilder& U64(uint64_t v) { return Raw(&v, 8); }
  GgufBuilder& I64(int64_t v) { return Raw(&v, 8); }
  GgufBuilder& F32(float v) { return Raw(&v, 4); }
  GgufBuilder& U8(uint8_t v) { return Raw(&v, 1); }
  GgufBuilder& Str(std::string_view s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  GgufBuilder& Raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  GgufBuilder& PadTo(size_t align) {
    while (bytes.size() % align) bytes.push_back(0);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

// A valid file: 4 metadata keys (string, u32, nested array, f32) and two F32 tensors.
std::vector<uint8_t> ValidFile() {
  GgufBuilder b;
  b.U32(0x46554747).U32(3).U64(2).U64(5);
  b.Str("general.architecture").U32(8).Str("llama");
  b.Str("llama.block_count").U32(4).U32(2);
  b.Str("nested").U32(9).U32(9).U64(2);  // array of 2 arrays of int32
  b.U32(5).U64(2).U32(1).U32(2);
  b.U32(5).U64(1).U32(3);
  b.Str("scale").U32(6).F32(0.5f);
  b.Str("flag").U32(7).U8(1);
  // tensor a: [4, 2] F32 at offset 0; tensor b: [8] F32 at offset 32
  b.Str("a").U32(2).I64(4).I64(2).U32(0).U64(0);
  b.Str("b").U32(1).I64(8).U32(0).U64(32);
  b.PadTo(32);
  for (int i = 0; i < 8; ++i) b.F32(static_cast<float>(i));
  for (int i = 0; i < 8; ++i) b.F32(static_cast<float>(10 + i));
  return b.bytes;
}

TEST(GgufFileTest, ParsesValidFile) {
  std::vector<uint8_t> data = ValidFile();
  auto file = GgufFile::FromBuffer(data.data(), data.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*f.GetInt("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.GetFloat("scale")), 0.5f);
  EXPECT_TRUE(*f.GetBool("flag"));
  const GgufValue* nested = f.Find("nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[0].array.size(), 2u);
  EXPECT_EQ(nested->array[1].array[0].i64, 3);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* a = f.FindTensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->num_elements, 8);
  EXPECT_EQ(a->row_length(), 4);
  EXPECT_EQ(a->num_rows(), 2);
  const float* av = reinterpret_cast<const float*>(a->data);
  EXPECT_EQ(av[7], 7.0f);
  const float* bv = reinterpret_cast<const float*>(f.FindTensor("b")->data);
  EXPECT_EQ(bv[0], 10.0f);
}

TEST(GgufFileTest, TypedGettersReportKeyAndType) {
  std::vector<uint8_t> data = ValidFile();
  auto file = GgufFile::FromBuffer(data.data(), data.size());
  ASSERT_TRUE(file.ok());
  auto missing = (*file)->GetString("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto wrong = (*file)->GetString("llama.block_count");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("llama.block_count"), std::string::npos);
  EXPECT_EQ(*(*file)->GetUintOr("absent", 7), 7u);
}

// Every truncation of a valid file is an error, never a crash or over-read (ASan checks).
TEST(GgufFileTest, EveryTruncationIsAnError) {
  std::vector<uint8_t> data = ValidFile();
  for (size_t n = 0; n < data.size(); ++n) {
    std::vector<uint8_t> cut(data.begin(), data.begin() + n);
    auto file = GgufFile::FromBuffer(cut.data(), cut.size());
    EXPECT_FALSE(file.ok()) << "prefix of " << n << " bytes parsed";
  }
}

std::string ParseError(std::vector<uint8_t> data) {
  auto file = GgufFile::FromBuffer(data.data(), data.size());
  return file.ok() ? "OK" : file.status().ToString();
}

void Patch(std::vector<uint8_t>& d, size_t off, const void* v, size_t n) { std::memcpy(&d[off], v, n); }

TEST(GgufFileTest, CorruptionsAreNamed) {
  std::vector<uint8_t> good = ValidFile();
  {
    auto d = good;
    d[0] = 'X';
    EXPECT_NE(ParseError(d).find("bad magic"), std::string::npos);
  }
  {
    auto d = good;
    uint32_t v = 7;
    Patch(d, 4, &v, 4);
    EXPECT_NE(ParseError(d).find("unsupported GGUF version 7"), std::string::npos);
  }
  {
    auto d = good;
    uint64_t huge = ~uint64_t{0} / 2;
    Patch(d, 8, &huge, 8);  // tensor count
    EXPECT_NE(ParseError(d).find("tensor count"), std::string::npos);
    d = good;
    Patch(d, 16, &huge, 8);  // kv count
    EXPECT_NE(ParseError(d).find("metadata count"), std::string::npos);
  }
  {
    auto d = good;
    uint64_t huge = uint64_t{1} << 40;
    Patch(d, 24, &huge, 8);  // first key length
    EXPECT_NE(ParseError(d).find("string length"), std::string::npos);
  }
  {
    // First key's value type (after magic+ver+counts+len+"general.architecture").
    auto d = good;
    uint32_t bad_type = 99;
    Patch(d, 24 + 8 + 20, &bad_type, 4);
    EXPECT_NE(ParseError(d).find("unknown value type 99"), std::string::npos);
  }
}

TEST(GgufFileTest, TensorBoundsChecked) {
  auto build = [](int64_t dim, uint32_t type, uint64_t offset, size_t data_bytes) {
    GgufBuilder b;
    b.U32(0x46554747).U32(3).U64(1).U64(0);
    b.Str("t").U32(1).I64(dim).U32(type).U64(offset);
    b.PadTo(32);
    std::vector<uint8_t> zeros(data_bytes, 0);
    b.Raw(zeros.data(), zeros.size());
    return b.bytes;
  };
  EXPECT_EQ(ParseError(build(8, 0, 0, 32)), "OK");
  EXPECT_NE(ParseError(build(8, 0, 0, 31)).find("runs past the end"), std::string::npos);
  EXPECT_NE(ParseError(build(8, 0, 64, 64)).find("runs past the end"), std::string::npos);
  EXPECT_NE(ParseError(build(8, 0, 3, 64)).find("not aligned"), std::string::npos);
  EXPECT_NE(ParseError(build(8, 123, 0, 64)).find("unsupported type id 123"), std::string::npos);
  EXPECT_NE(ParseError(build(33, 8, 0, 64)).find("block size"), std::string::npos);  // Q8_0
  EXPECT_NE(ParseError(build(-1, 0, 0, 64)).find("negative"), std::string::npos);
  EXPECT_NE(ParseError(build(int64_t{1} << 60, 0, 0, 64)).find("past the end"), std::string::npos);
}

TEST(GgufFileTest, OpenMissingFileIsNotFound) {
  auto file = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem
