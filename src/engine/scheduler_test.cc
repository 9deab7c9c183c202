// The scheduler's policies without a model: admission order and preemption victims under
// fcfs and priority (--scheduling-policy).
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include "engine/kv_connector.h"

#include <memory>
#include <string>
#include <vector>

namespace tandem {
namespace {

using Policy = EngineOptions::SchedulingPolicy;

class SchedulerPolicyTest : public ::testing::Test {
 protected:
  // `num_blocks` blocks of 4 tokens, no prefix caching.
  void Init(Policy policy, int max_num_seqs, int num_blocks, int budget = 64, bool chunked = true) {
    kv_ =
        std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{num_blocks, 4, false, "fp", "f16"});
    scheduler_ = std::make_unique<Scheduler>(kv_.get(), max_num_seqs, budget, policy, chunked);
  }

  Request* Add(const std::string& id, int priority, int prompt_len = 3) {
    EngineRequest e;
    e.request_id = id;
    e.prompt_tokens.assign(static_cast<size_t>(prompt_len), 7);
    e.params.priority = priority;
    e.on_output = [](const RequestOutput&) {};
    auto r = std::make_unique<Request>(std::move(e), 1);
    r->arrival_seq = next_seq_++;
    requests_.push_back(std::move(r));
    scheduler_->AddRequest(requests_.back().get());
    return requests_.back().get();
  }

  // Ids scheduled by one step, in order; the scheduled requests' KV counts as computed.
  std::vector<std::string> Step() {
    std::vector<std::string> ids;
    for (const ScheduledRequest& s : scheduler_->Schedule().scheduled) {
      s.request->num_computed_tokens += s.num_new_tokens;
      ids.push_back(s.request->id);
    }
    return ids;
  }

  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Request>> requests_;
  uint64_t next_seq_ = 0;
};

TEST_F(SchedulerPolicyTest, FcfsAdmitsInArrivalOrder) {
  Init(Policy::kFcfs, /*max_num_seqs=*/1, /*num_blocks=*/16);
  Add("a", 0);
  Add("b", 0);
  EXPECT_EQ(Step(), (std::vector<std::string>{"a"}));
}

TEST_F(SchedulerPolicyTest, PriorityOvertakesTheQueue) {
  Init(Policy::kPriority, /*max_num_seqs=*/1, /*num_blocks=*/16);
  Request* low1 = Add("low1", 5);
  Add("low2", 5);
  Add("high", -1);  // arrives last, runs first
  Add("mid", 0);
  EXPECT_EQ(Step(), (std::vector<std::string>{"high"}));
  scheduler_->FinishRequest(requests_[2].get());
  EXPECT_EQ(Step(), (std::vector<std::string>{"mid"}));
  scheduler_->FinishRequest(requests_[3].get());
  EXPECT_EQ(Step(), (std::vector<std::string>{"low1"}));  // equal priorities: arrival order
  scheduler_->FinishRequest(low1);
  EXPECT_EQ(Step(), (std::vector<std::string>{"low2"}));
}

// Out of blocks, fcfs preempts the newest running request; priority preempts the one
// with the largest (priority, arrival), even when it was admitted first.
TEST_F(SchedulerPolicyTest, PreemptionVictims) {
  for (Policy policy : {Policy::kFcfs, Policy::kPriority}) {
    SCOPED_TRACE(policy == Policy::kFcfs ? "fcfs" : "priority");
    requests_.clear();
    // 3 blocks of 4 tokens: two requests of 3 prompt tokens fit; when both grow past 4
    // tokens each needs a second block and one of them must go.
    Init(policy, /*max_num_seqs=*/4, /*num_blocks=*/3);
    Request* worst = Add("worst", 9);
    EXPECT_EQ(Step(), (std::vector<std::string>{"worst"}));
    Request* best = Add("best", 0);
    EXPECT_EQ(Step(), (std::vector<std::string>{"best"}));
    for (Request* r : {worst, best}) r->tokens.insert(r->tokens.end(), {1, 2});  // 5 tokens each
    SchedulerOutput out = scheduler_->Schedule();
    ASSERT_EQ(out.num_preempted, 1);
    ASSERT_EQ(out.scheduled.size(), 1u);
    // fcfs: the newest ("best") goes; priority: "worst" goes although it came first.
    EXPECT_EQ(out.scheduled[0].request->id, policy == Policy::kFcfs ? "worst" : "best");
    EXPECT_EQ((policy == Policy::kFcfs ? best : worst)->status, RequestStatus::kWaiting);
    EXPECT_EQ(scheduler_->num_waiting(), 1);
  }
}

// A connector that records, for every RequestFinished, how many blocks the request
// still held (the connector's promise: they are still allocated).
class RecordingConnector : public KvConnector {
 public:
  explicit RecordingConnector(const kv::KvCacheManager* kv) : kv_(kv) {}
  void AcceptRequest(KvTransferRequest*, int) const override {}
  int GetNumNewMatchedTokens(const Request&, int) override { return 0; }
  void UpdateStateAfterAlloc(const Request&, int, int) override {}
  KvFinishAction RequestFinished(const Request& r, std::string_view reason) override {
    finished.emplace_back(r.id + ":" + std::string(reason), kv_->GetBlockTable(r.id).size());
    return {};
  }
  void StartLoadKv() override {}
  void SaveKv(const Request&) override {}
  void GetFinished(bool, std::vector<KvLoadResult>*, std::vector<std::string>*) override {}
  void CancelLoad(const std::string&) override {}
  std::vector<std::pair<std::string, size_t>> finished;  // id:reason, blocks held then

 private:
  const kv::KvCacheManager* kv_;
};

// The recompute scheduler's hand-back: the victim's connector hears RequestFinished
// while the victim still holds its blocks, and the blocks are free afterwards.
TEST_F(SchedulerPolicyTest, HandBackFinishesWithTheBlocksStillAllocated) {
  Init(Policy::kFcfs, /*max_num_seqs=*/4, /*num_blocks=*/3);
  RecordingConnector connector(kv_.get());
  scheduler_->SetConnector(&connector);
  scheduler_->SetHandBack(true);
  Request* first = Add("first", 0);
  EXPECT_EQ(Step(), (std::vector<std::string>{"first"}));
  Request* second = Add("second", 0);
  EXPECT_EQ(Step(), (std::vector<std::string>{"second"}));
  for (Request* r : {first, second}) r->tokens.insert(r->tokens.end(), {1, 2});  // a second block each
  SchedulerOutput out = scheduler_->Schedule();
  ASSERT_EQ(out.handed_back.size(), 1u);
  EXPECT_EQ(out.handed_back[0].first, second);
  ASSERT_EQ(connector.finished.size(), 1u);
  EXPECT_EQ(connector.finished[0].first, "second:stop");
  EXPECT_EQ(connector.finished[0].second, 1u) << "RequestFinished ran after the blocks were freed";
  EXPECT_TRUE(kv_->GetBlockTable("second").empty());
  EXPECT_EQ(scheduler_->num_waiting(), 0);
}

// --no-enable-chunked-prefill: a prompt waits until the step's remaining budget holds all
// of it; with chunking it would start in the same step.
TEST_F(SchedulerPolicyTest, WithoutChunkedPrefillAPromptRunsWhole) {
  for (bool chunked : {true, false}) {
    SCOPED_TRACE(chunked ? "chunked" : "not chunked");
    requests_.clear();
    Init(Policy::kFcfs, /*max_num_seqs=*/4, /*num_blocks=*/16, /*budget=*/8, chunked);
    Add("a", 0, /*prompt_len=*/6);
    Add("b", 0, /*prompt_len=*/6);
    SchedulerOutput out = scheduler_->Schedule();
    ASSERT_EQ(out.scheduled.size(), chunked ? 2u : 1u);
    EXPECT_EQ(out.scheduled[0].num_new_tokens, 6);
    if (chunked) {
      EXPECT_EQ(out.scheduled[1].num_new_tokens, 2);  // b's first chunk
    }
  }
}

}  // namespace
}  // namespace tandem
