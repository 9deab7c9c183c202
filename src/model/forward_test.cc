// Forward: a token's logits do not depend on how many threads compute them. Attention
// splits a GQA group's query heads over tasks when a step has fewer (token, KV head)
// pairs than threads (one decoding sequence), which must not change a bit.
#include "model/forward.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/thread_pool.h"
#include "model/kv_store.h"
#include "model/model.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

// Logits of a 12-token prompt's last position, then of 4 decode steps (one token each),
// on `pool` (null: the calling thread).
std::vector<float> PromptThenDecode(const Model& model, ThreadPool* pool) {
  const ModelConfig& c = model.config();
  Forward forward(c, model.weights(), pool);
  ContiguousKvStore kv(c.n_layers, 16, c.kv_dim(), c.v_dim());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back((i * 41 + 7) % c.n_vocab);
  std::vector<float> all, logits;
  forward.Run({ForwardSequence{tokens.data(), 12, 0, &kv, false}}, &logits);
  all.insert(all.end(), logits.begin(), logits.end());
  for (int pos = 12; pos < 16; ++pos) {
    forward.Run({ForwardSequence{tokens.data() + pos, 1, pos, &kv, false}}, &logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST(ForwardTest, LogitsDoNotDependOnTheThreadCount) {
  for (const char* fixture : {"gemma3.gguf", "llama.gguf", "qwen2.gguf", "qwen3.gguf",
                              "qwen3moe-q4_k_m.gguf", "glm4moe-q8_0.gguf", "deepseek2-q4_k_m.gguf",
                              "deepseek2-q8_0.gguf"}) {
    SCOPED_TRACE(fixture);
    auto model = Model::Load(FixturePath(fixture));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig& c = (*model)->config();
    // The fixtures have GQA groups of 2 or more heads, so 3 and 4 threads split them.
    ASSERT_GT(c.n_heads / c.n_kv_heads, 1);
    const std::vector<float> want = PromptThenDecode(**model, nullptr);
    ASSERT_EQ(want.size(), static_cast<size_t>(5 * c.n_vocab));
    for (int threads : {2, 3, 4}) {
      ThreadPool pool(threads);
      EXPECT_EQ(PromptThenDecode(**model, &pool), want) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tandem
