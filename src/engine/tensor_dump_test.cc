#include "engine/tensor_dump.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/thread_pool.h"
#include "model/forward.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TensorDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("tandem_tensor_dump_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Every traced tensor lands in its .npy file; result_output holds the logits Forward gives
// for the same tokens, bit for bit, behind a NumPy 1.0 header with the right shape.
TEST_F(TensorDumpTest, WritesEveryLayerAndTheLogits) {
  auto model = Model::Load(FixturePath("qwen3moe-q8_0.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = {1, 5, 9, 20, 33};
  std::vector<std::string> names;
  ASSERT_TRUE(DumpTensors(**model, &pool, tokens, {}, dir_, &names).ok());
  for (int il = 0; il < c.n_layers; ++il) {
    for (const char* t : {"attn_norm-", "attn_out-", "ffn_inp-", "ffn_norm-", "ffn_out-", "l_out-"}) {
      EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + t + std::to_string(il) + ".npy")) << t << il;
    }
  }
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "attn_norm-0");
  EXPECT_EQ(names.back(), "result_output");
  EXPECT_EQ(ReadAll(dir_ + "/tokens.txt"), "1,5,9,20,33\n");

  // The logits of the same pass, without the trace.
  ContiguousKvStore kv(c.n_layers, 5, c.KeyRowBytes(KvDtype::kF16), c.ValueRowBytes(KvDtype::kF16), KvDtype::kF16);
  Forward forward(c, (*model)->weights(), &pool);
  ForwardSequence s;
  s.tokens = tokens.data();
  s.n_tokens = 5;
  s.kv = &kv;
  s.all_logits = true;
  std::vector<float> logits;
  forward.Run({s}, &logits);
  const std::string npy = ReadAll(dir_ + "/result_output.npy");
  ASSERT_GT(npy.size(), 10u);
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(npy[8]) | static_cast<size_t>(static_cast<uint8_t>(npy[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(npy.find("'shape': (5, " + std::to_string(c.n_vocab) + ")"), std::string::npos);
  ASSERT_EQ(npy.size(), 10 + header_len + logits.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(npy.data() + 10 + header_len, logits.data(), logits.size() * sizeof(float)), 0);
}

TEST_F(TensorDumpTest, PrefixesChooseTheTensors) {
  auto model = Model::Load(FixturePath("qwen3moe-q8_0.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  TensorDumpOptions options;
  options.prefixes = {"l_out"};
  std::vector<std::string> names;
  ASSERT_TRUE(DumpTensors(**model, nullptr, {3, 4}, options, dir_, &names).ok());
  ASSERT_EQ(static_cast<int>(names.size()), (*model)->config().n_layers);
  for (const std::string& n : names) EXPECT_EQ(n.rfind("l_out-", 0), 0u) << n;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/attn_norm-0.npy"));
  // MLA layers add the attention before its output projection (llama.cpp's kqv_out).
  auto mla = Model::Load(FixturePath("deepseek2-q8_0.gguf"));
  ASSERT_TRUE(mla.ok()) << mla.status().ToString();
  options.prefixes = {"kqv_out"};
  ASSERT_TRUE(DumpTensors(**mla, nullptr, {3, 4, 5}, options, dir_, &names).ok());
  EXPECT_EQ(static_cast<int>(names.size()), (*mla)->config().n_layers);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/kqv_out-0.npy"));
}

TEST_F(TensorDumpTest, BadInputIsRefused) {
  auto model = Model::Load(FixturePath("qwen3moe-q8_0.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int32_t n_vocab = (*model)->config().n_vocab;
  EXPECT_EQ(DumpTensors(**model, nullptr, {}, {}, dir_, nullptr).code(), StatusCode::kInvalidArgument);
  const Status out_of_vocab = DumpTensors(**model, nullptr, {1, n_vocab}, {}, dir_, nullptr);
  EXPECT_EQ(out_of_vocab.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_vocab.message().find(std::to_string(n_vocab)), std::string::npos) << out_of_vocab.message();
  TensorDumpOptions none;
  none.prefixes = {"no_such_tensor"};
  EXPECT_EQ(DumpTensors(**model, nullptr, {1}, none, dir_, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DumpTensors(**model, nullptr, {1}, {}, dir_ + "/missing_dir", nullptr).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace tandem
