// SafetensorsFile and ParseSafetensorsIndex: a file the reference writer (the Python
// `safetensors` package) wrote, and every header lie the format's rules refuse.
#include "model/safetensors_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/little_endian.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

// A file of `header` (JSON text) and `data_bytes` bytes of data (value i % 251).
std::vector<uint8_t> File(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> f(8 + header.size() + data_bytes);
  little_endian::Store<uint64_t>(f.data(), header.size());
  std::memcpy(f.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) f[8 + header.size() + i] = static_cast<uint8_t>(i % 251);
  return f;
}

Status Parse(const std::vector<uint8_t>& f) { return SafetensorsFile::FromBuffer(f.data(), f.size()).status(); }

// The message names what is wrong.
void ExpectRefused(const std::vector<uint8_t>& f, const std::string& words) {
  Status s = Parse(f);
  ASSERT_FALSE(s.ok()) << "accepted; expected: " << words;
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

TEST(SafetensorsFileTest, ReadsWhatTheReferenceWriterWrote) {
  // tests/data/reference_writer.safetensors: safetensors.numpy.save_file of an F32 [3, 4]
  // arange, an I8 [4, 4] arange from -8, an F16 [4, 1] of 0.5, metadata {"format": "pt"}.
  auto file = SafetensorsFile::Open(TestDataPath("reference_writer.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const SafetensorsFile& f = **file;
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 3u);
  const SafetensorsTensor* embed = f.FindTensor("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{3, 4}));
  float v[12];
  std::memcpy(v, embed->data, sizeof(v));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], static_cast<float>(i));
  const SafetensorsTensor* w = f.FindTensor("model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, SafetensorsDtype::kI8);
  EXPECT_EQ(static_cast<int8_t>(w->data[0]), -8);
  EXPECT_EQ(static_cast<int8_t>(w->data[15]), 7);
  const SafetensorsTensor* scale = f.FindTensor("model.layers.0.mlp.down_proj.weight_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(scale->size_bytes(), 8u);
  EXPECT_EQ(f.FindTensor("missing"), nullptr);
}

TEST(SafetensorsFileTest, AcceptsTrailingSpacesAndAnEmptyFile) {
  EXPECT_TRUE(Parse(File(R"({"a":{"dtype":"F8_E4M3","shape":[2,3],"data_offsets":[0,6]}}   )", 6)).ok());
  EXPECT_TRUE(Parse(File("{}", 0)).ok());
  EXPECT_TRUE(Parse(File(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", 4)).ok());  // a scalar
  EXPECT_TRUE(Parse(File(R"({"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", 0)).ok());
}

TEST(SafetensorsFileTest, RefusesHeadersThatLie) {
  ExpectRefused({1, 2, 3}, "truncated");
  std::vector<uint8_t> huge(8);
  little_endian::Store<uint64_t>(huge.data(), SafetensorsFile::kMaxHeaderBytes + 1);
  ExpectRefused(huge, "over the limit");
  std::vector<uint8_t> short_header = File("{}", 0);
  little_endian::Store<uint64_t>(short_header.data(), 50);
  ExpectRefused(short_header, "truncated");
  ExpectRefused(File("[1,2]", 0), "does not start with '{'");
  ExpectRefused(File("{\"a\":", 0), "not valid JSON");
  ExpectRefused(File(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype 'F33'");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4), "needs 8");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "end before begin");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "data_offsets must be");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4), "unknown key 'x'");
  // Overlapping, a hole, past the end, data left over.
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                         "b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     8),
                "overlaps");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},
                         "b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     12),
                "a hole");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "past the data");
  ExpectRefused(File(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8), "ends at 4");
  ExpectRefused(File(R"({"__metadata__":{"k":1}})", 0), "__metadata__.k must be a string");
  ExpectRefused(File(R"({"a":[[[[[[[[[[1]]]]]]]]]]})", 0), "nests deeper");
}

TEST(SafetensorsFileTest, OpenNamesTheFile) {
  auto missing = SafetensorsFile::Open("/nonexistent/model.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.safetensors"), std::string::npos);
}

TEST(SafetensorsIndexTest, ParsesShardsAndRefusesPathsOutOfTheFolder) {
  auto index = ParseSafetensorsIndex(
      R"({"metadata":{"total_size":64},"weight_map":{"a":"model-00001-of-00002.safetensors",
          "b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}})",
      "model.safetensors.index.json");
  ASSERT_TRUE(index.ok()) << index.status().message();
  EXPECT_EQ(index->total_size, 64);
  EXPECT_EQ(index->shards(),
            (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  for (const char* bad : {R"({"weight_map":{"a":"../x.safetensors"}})", R"({"weight_map":{"a":"/etc/passwd"}})",
                          R"({"weight_map":{}})", R"({"weight_map":{"a":3}})", R"([])",
                          R"({"metadata":{"total_size":-1},"weight_map":{"a":"x"}})"}) {
    auto r = ParseSafetensorsIndex(bad, "idx.json");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("idx.json"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace tandem
