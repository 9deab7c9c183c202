// LoadGenerationDefaults: vLLM's --generation-config modes and the override JSON, and
// the request parser applying the defaults only to fields a request leaves out.
#include "server/generation_defaults.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

class GenerationDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_gencfg_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << "{}";
    std::ofstream(dir_ / "generation_config.json")
        << R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 64,
              "eos_token_id": [1, 2]})";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(GenerationDefaultsTest, AutoReadsTheCheckpointsFile) {
  auto d = LoadGenerationDefaults("auto", dir_.string(), "");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d->temperature, 0.6);
  EXPECT_EQ(*d->top_p, 0.95);
  EXPECT_EQ(*d->top_k, 20);
  EXPECT_EQ(*d->max_tokens, 64);
  EXPECT_FALSE(d->min_p.has_value());
  EXPECT_EQ(DescribeGenerationDefaults(*d), "temperature=0.6 top_p=0.95 top_k=20 max_new_tokens=64");
}

TEST_F(GenerationDefaultsTest, VllmIgnoresItAndAGgufFileHasNone) {
  EXPECT_TRUE(LoadGenerationDefaults("vllm", dir_.string(), "")->empty());
  EXPECT_TRUE(LoadGenerationDefaults("auto", (dir_ / "model.gguf").string(), "")->empty());
}

TEST_F(GenerationDefaultsTest, AFolderAndTheOverride) {
  auto d = LoadGenerationDefaults(dir_.string(), "/nonexistent/model.gguf", R"({"temperature": 0.0})");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d->temperature, 0.0);
  EXPECT_EQ(*d->top_k, 20);
}

TEST_F(GenerationDefaultsTest, BadInputIsNamed) {
  auto bad_mode = LoadGenerationDefaults("/nonexistent-folder", dir_.string(), "");
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.status().message().find("/nonexistent-folder"), std::string::npos);
  auto bad_override = LoadGenerationDefaults("vllm", dir_.string(), R"({"top_p": 2})");
  ASSERT_FALSE(bad_override.ok());
  EXPECT_NE(bad_override.status().message().find("top_p"), std::string::npos);
  std::ofstream(dir_ / "generation_config.json") << R"({"temperature": "hot"})";
  auto bad_file = LoadGenerationDefaults("auto", dir_.string(), "");
  ASSERT_FALSE(bad_file.ok());
  EXPECT_NE(bad_file.status().message().find("temperature"), std::string::npos);
}

TEST(GenerationDefaultsRequestTest, FillOnlyWhatTheRequestLeavesOut) {
  GenerationDefaults d;
  d.temperature = 0.6;
  d.top_k = 20;
  d.max_tokens = 8;
  auto r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "hi"}], "top_k": 5})", d);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FLOAT_EQ(r->sampling.params.sampling.temperature, 0.6f);
  EXPECT_EQ(r->sampling.params.sampling.top_k, 5);
  ASSERT_TRUE(ResolveMaxTokens(10, 100, std::nullopt, &r->sampling).ok());
  EXPECT_EQ(r->sampling.params.max_tokens, 8);  // max_new_tokens caps "the rest of the context"
  auto with_max = ParseChatRequest(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50})", d);
  ASSERT_TRUE(ResolveMaxTokens(10, 100, std::nullopt, &with_max->sampling).ok());
  EXPECT_EQ(with_max->sampling.params.max_tokens, 50);
}

}  // namespace
}  // namespace tandem::server
