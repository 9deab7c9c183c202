// Forward: a token's logits do not depend on how many threads compute them (attention
// splits a GQA group's query heads over tasks when a step has fewer (token, KV head)
// pairs than threads, one decoding sequence), nor on how its prompt is chunked (the
// tiled prefill attention and the per-token one give the same bits).
#include "model/forward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common/thread_pool.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

// Logits of a `prompt`-token prompt's last position, then of 4 decode steps (one token
// each), on `pool` (null: the calling thread).
std::vector<float> PromptThenDecode(const Model& model, ThreadPool* pool, int prompt = 12) {
  const ModelConfig& c = model.config();
  Forward forward(c, model.weights(), pool);
  ContiguousKvStore kv(c.n_layers, prompt + 4, c.kv_dim(), c.v_dim());
  std::vector<int32_t> tokens;
  for (int i = 0; i < prompt + 4; ++i) tokens.push_back((i * 41 + 7) % c.n_vocab);
  std::vector<float> all, logits;
  forward.Run({ForwardSequence{tokens.data(), prompt, 0, &kv, false}}, &logits);
  all.insert(all.end(), logits.begin(), logits.end());
  for (int pos = prompt; pos < prompt + 4; ++pos) {
    forward.Run({ForwardSequence{tokens.data() + pos, 1, pos, &kv, false}}, &logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST(ForwardTest, LogitsDoNotDependOnTheThreadCount) {
  for (const char* fixture : {"gemma3.gguf", "llama.gguf", "qwen2.gguf", "qwen3.gguf",
                              "qwen3moe-q4_k_m.gguf", "glm4moe-q8_0.gguf", "deepseek2-q4_k_m.gguf",
                              "deepseek2-q8_0.gguf", "glm-dsa-q4_k_m.gguf", "glm-dsa-q8_0.gguf",
                              "deepseek32-q4_k_m.gguf", "deepseek32-q8_0.gguf"}) {
    SCOPED_TRACE(fixture);
    auto model = Model::Load(FixturePath(fixture));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig& c = (*model)->config();
    // glm-dsa, deepseek32: past its indexer's top_k, so the sparse selection runs on every thread count.
    const int prompt = c.dsa.n_heads > 0 ? 2 * c.dsa.top_k : 12;
    // The fixtures have GQA groups of 2 or more heads, so 3 and 4 threads split them.
    ASSERT_GT(c.n_heads / c.n_kv_heads, 1);
    const std::vector<float> want = PromptThenDecode(**model, nullptr, prompt);
    ASSERT_EQ(want.size(), static_cast<size_t>(5 * c.n_vocab));
    for (int threads : {2, 3, 4}) {
      ThreadPool pool(threads);
      EXPECT_EQ(PromptThenDecode(**model, &pool, prompt), want) << threads << " threads";
    }
  }
}

// All logits of a prompt of n tokens under `config` (the model's, or a variant of it).
std::vector<float> AllLogits(const Model& model, const ModelConfig& config, int n) {
  Forward forward(config, model.weights(), nullptr);
  ContiguousKvStore kv(config.n_layers, n, config.kv_dim(), config.v_dim());
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 41 + 7) % config.n_vocab);
  std::vector<float> logits;
  forward.Run({ForwardSequence{tokens.data(), n, 0, &kv, true}}, &logits);
  return logits;
}

// Logits of every position of an n-token prompt fed in chunks of `chunk` tokens.
std::vector<float> ChunkedLogits(const Model& model, ThreadPool* pool, int n, int chunk) {
  const ModelConfig& c = model.config();
  Forward forward(c, model.weights(), pool);
  ContiguousKvStore kv(c.n_layers, n, c.kv_dim(), c.v_dim());
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back((i * 41 + 7) % c.n_vocab);
  std::vector<float> all, logits;
  for (int start = 0; start < n; start += chunk) {
    const int m = std::min(chunk, n - start);
    forward.Run({ForwardSequence{tokens.data() + start, m, start, &kv, true}}, &logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// Prefill chunks of 8 or more tokens take the tiled attention kernel, shorter ones and
// decode steps the per-token one, with the same bits: a prompt's logits do not depend
// on how it is chunked (150 tokens: past gemma3's window of 8, over several KV tiles).
TEST(ForwardTest, ChunkedPrefillMatchesOneChunkAndTokenByToken) {
  for (const char* fixture : {"gemma3.gguf", "llama.gguf", "qwen2.gguf", "qwen3.gguf"}) {
    SCOPED_TRACE(fixture);
    auto model = Model::Load(FixturePath(fixture));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const int n = 150;
    const std::vector<float> one = ChunkedLogits(**model, nullptr, n, n);
    EXPECT_EQ(ChunkedLogits(**model, nullptr, n, 50), one);
    EXPECT_EQ(ChunkedLogits(**model, nullptr, n, 9), one);  // the last chunk of 6 per token
    ThreadPool pool(3);
    EXPECT_EQ(ChunkedLogits(**model, &pool, n, 75), one);
    EXPECT_EQ(ChunkedLogits(**model, nullptr, n, 1), one);
  }
}

// DeepSeek sparse attention (glm-dsa, deepseek32): up to top_k positions a query attends to its whole past
// (dense), beyond it only to the indexer's choice, which changes the logits.
TEST(ForwardTest, SparseAttentionIsDenseUpToTopKThenSelects) {
  for (const char* fixture : {"glm-dsa-q4_k_m.gguf", "glm-dsa-q8_0.gguf", "deepseek32-q4_k_m.gguf",
                              "deepseek32-q8_0.gguf"}) {
    SCOPED_TRACE(fixture);
    auto model = Model::Load(FixturePath(fixture));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig& c = (*model)->config();
    ASSERT_GT(c.dsa.n_heads, 0);
    const int top_k = c.dsa.top_k, n = 2 * top_k;
    ModelConfig dense = c;
    dense.dsa.top_k = n;  // every position kept
    const std::vector<float> sparse_logits = AllLogits(**model, c, n);
    const std::vector<float> dense_logits = AllLogits(**model, dense, n);
    const size_t split = static_cast<size_t>(top_k) * c.n_vocab;
    EXPECT_TRUE(std::equal(sparse_logits.begin(), sparse_logits.begin() + split, dense_logits.begin()));
    for (int pos = top_k; pos < n; ++pos) {
      const size_t row = static_cast<size_t>(pos) * c.n_vocab;
      EXPECT_FALSE(std::equal(sparse_logits.begin() + row, sparse_logits.begin() + row + c.n_vocab,
                              dense_logits.begin() + row))
          << "position " << pos;
    }
  }
}

}  // namespace
}  // namespace tandem
