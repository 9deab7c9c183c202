// MtpProposer's bookkeeping against a recomputation from scratch: after a prompt run in
// two chunks, and after a verification that kept one of three drafts, its drafts equal
// those of the NextN block run over the whole sequence at once (trunk hidden states from
// one forward pass, h_{-1} = 0), step by step.
#include "engine/mtp_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/thread_pool.h"
#include "engine/engine_test_util.h"
#include "engine/kv_arena.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_store.h"

namespace tandem {
namespace {

int32_t Argmax(const float* row, int n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// Drafts of the NextN block for `tokens` (the last one the newest, not yet run by the
// trunk), computed from scratch.
std::vector<int32_t> ReferenceDrafts(const Model& model, ThreadPool* pool, const std::vector<int32_t>& tokens, int k) {
  const ModelConfig& c = model.config();
  const int64_t E = c.n_embd;
  const int n = static_cast<int>(tokens.size());
  ContiguousKvStore kv(c.n_layers + 1, n + k, c.kv_dim(), c.v_dim());
  Forward f(c, model.weights(), pool);
  std::vector<float> logits, hidden;
  f.Run({ForwardSequence{tokens.data(), n - 1, 0, &kv, false, false}}, &logits, &hidden);
  std::vector<float> h(E, 0.0f);  // h_{-1}
  h.insert(h.end(), hidden.begin(), hidden.begin() + (n - 1) * E);
  std::vector<float> mtp_hidden;
  f.RunNextn(0, {ForwardSequence{tokens.data(), n, 0, &kv, false, true}}, h.data(), &logits, &mtp_hidden);
  std::vector<int32_t> drafts = {Argmax(logits.data(), c.n_vocab)};
  std::vector<float> prev(mtp_hidden.end() - E, mtp_hidden.end());
  while (static_cast<int>(drafts.size()) < k) {
    const int32_t t = drafts.back();
    f.RunNextn(0, {ForwardSequence{&t, 1, n - 1 + static_cast<int64_t>(drafts.size()), &kv, false, true}}, prev.data(),
               &logits, &mtp_hidden);
    drafts.push_back(Argmax(logits.data(), c.n_vocab));
    prev.assign(mtp_hidden.begin(), mtp_hidden.begin() + E);
  }
  return drafts;
}

TEST(MtpProposerTest, DraftsEqualARecomputationFromScratch) {
  for (const char* fixture :
       {"glm4moe-q4_k_m.gguf", "deepseek2-q4_k_m.gguf", "glm-dsa-q4_k_m.gguf", "deepseek32-q4_k_m.gguf"}) {
    auto model = LoadFixture(fixture);
    ASSERT_NE(model, nullptr);
    const ModelConfig& c = model->config();
    ThreadPool pool(2);
    auto arena = KvArena::Create(64, c.n_layers + 1, 4, c.KeyRowBytes(KvDtype::kF16),
                                 c.ValueRowBytes(KvDtype::kF16), KvDtype::kF16, false);
    ASSERT_TRUE(arena.ok());
    kv::KvCacheManager kv(kv::KvCacheConfig{64, 4, false, model->fingerprint(), "f16"});
    ModelRunner runner(c, model->weights(), &pool, arena->get(), &kv, /*keep_hidden=*/true);
    MtpProposer mtp(c, model->weights(), &pool, arena->get(), &kv);

    EngineRequest er;
    er.request_id = "r";
    er.prompt_tokens = {11, 42, 7, 300, 5, 99, 123, 8, 77, 250};
    Request r(std::move(er), 1);
    auto step = [&](int n_new) {
      ASSERT_TRUE(kv.AllocateSlots(r.id, r.num_computed_tokens, n_new));
      std::vector<ScheduledRequest> plan = {{&r, n_new}};
      mtp.FillDrafts(plan);
      StepLogits logits = runner.Run(plan);
      mtp.AfterForward(plan, logits.hidden, logits.first_token);
    };
    step(6);  // the prompt in two chunks
    r.num_computed_tokens = 6;
    step(4);
    r.num_computed_tokens = 10;
    r.tokens.push_back(17);  // the "sampled" token x_10

    constexpr int k = 3;
    mtp.Reserve(&r, k);
    ASSERT_EQ(r.spec_tokens.size(), static_cast<size_t>(k));
    ASSERT_TRUE(kv.AllocateSlots(r.id, r.num_computed_tokens, 1 + k));
    std::vector<ScheduledRequest> plan = {{&r, 1 + k}};
    mtp.FillDrafts(plan);
    const std::vector<int32_t> drafts = r.spec_tokens;
    EXPECT_EQ(drafts, ReferenceDrafts(*model, &pool, r.tokens, k)) << fixture;

    // The trunk verifies [x_10, d1, d2, d3]; d1 is kept, then a token other than d2.
    StepLogits logits = runner.Run(plan);
    mtp.AfterForward(plan, logits.hidden, logits.first_token);
    r.spec_tokens.clear();
    r.tokens.push_back(drafts[0]);
    r.tokens.push_back(drafts[1] == 3 ? 4 : 3);
    r.num_computed_tokens = 12;
    kv.FreeTail(r.id, static_cast<int32_t>(r.tokens.size()));
    mtp.OnVerified(r, 1);
    mtp.Reserve(&r, k);
    ASSERT_EQ(r.spec_tokens.size(), static_cast<size_t>(k));
    ASSERT_TRUE(kv.AllocateSlots(r.id, r.num_computed_tokens, 1 + k));
    mtp.FillDrafts(plan);
    EXPECT_EQ(r.spec_tokens, ReferenceDrafts(*model, &pool, r.tokens, k)) << fixture;

    // A request whose newest position's predecessor was never run here gets no drafts.
    EngineRequest other;
    other.request_id = "s";
    other.prompt_tokens = {1, 2, 3};
    Request s(std::move(other), 1);
    mtp.Reserve(&s, k);
    EXPECT_TRUE(s.spec_tokens.empty());
  }
}

}  // namespace
}  // namespace tandem
