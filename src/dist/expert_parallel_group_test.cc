#include "dist/expert_parallel_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "dist/dist_test_util.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/test_paths.h"

namespace tandem::dist {
namespace {

using std::chrono::milliseconds;

// Joins `size` ranks (one thread each) on 127.0.0.1 and runs body(rank, group) on each.
void RunRanks(int size, const std::function<void(int, ExpertParallelGroup*)>& body) {
  const uint16_t port = FreePort();
  std::vector<std::unique_ptr<ExpertParallelGroup>> groups(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ExpertParallelOptions o;
      o.rank = r;
      o.size = size;
      o.store_port = port;
      o.join_timeout = milliseconds(20000);
      o.timeout = milliseconds(20000);
      auto g = ExpertParallelGroup::Join(o);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      groups[r] = std::move(g).value();
      body(r, groups[r].get());
    });
  }
  for (auto& t : threads) t.join();
}

TEST(ExpertShardTest, ContiguousLayoutAsVllm) {
  // 10 experts over 4 ranks: 3, 3, 2, 2.
  int covered = 0;
  for (int r = 0; r < 4; ++r) {
    ExpertShard s{r, 4};
    EXPECT_EQ(s.First(10), covered);
    for (int e = s.First(10); e < s.First(10) + s.Count(10); ++e) EXPECT_EQ(ExpertShard::Owner(e, 10, 4), r);
    covered += s.Count(10);
  }
  EXPECT_EQ(covered, 10);
  EXPECT_EQ(ExpertShard({3, 4}).Count(10), 2);
}

TEST(ExpertParallelGroupTest, AllToAllsAndAnyRankOverFourRanks) {
  const int n = 4, W = 3;
  RunRanks(n, [&](int r, ExpertParallelGroup* g) {
    // Rank r sends (r + d) % 3 rows to rank d, each row = {r, d, i}.
    std::vector<int64_t> send_rows(n), recv_rows(n);
    std::vector<float> send;
    for (int d = 0; d < n; ++d) {
      send_rows[d] = (r + d) % 3;
      for (int i = 0; i < send_rows[d]; ++i) send.insert(send.end(), {float(r), float(d), float(i)});
    }
    ASSERT_TRUE(g->ExchangeCounts(send_rows, recv_rows).ok());
    int64_t total = 0;
    for (int s = 0; s < n; ++s) {
      EXPECT_EQ(recv_rows[s], (s + r) % 3);
      total += recv_rows[s];
    }
    std::vector<float> recv(static_cast<size_t>(total * W), -1.0f);
    ASSERT_TRUE(g->ExchangeRows(send.data(), send_rows, recv.data(), recv_rows, W).ok());
    int64_t row = 0;
    for (int s = 0; s < n; ++s) {
      for (int i = 0; i < recv_rows[s]; ++i, ++row) {
        EXPECT_EQ(recv[row * W + 0], float(s));
        EXPECT_EQ(recv[row * W + 1], float(r));
        EXPECT_EQ(recv[row * W + 2], float(i));
      }
    }
    auto any = g->AnyRank(r == 2);
    ASSERT_TRUE(any.ok());
    EXPECT_TRUE(*any);
    auto none = g->AnyRank(false);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(*none);
  });
}

TEST(ExpertParallelGroupTest, ALostPeerFailsTheNextCollectiveAndEveryLaterOne) {
  // Rank 1 joins and leaves (its sockets close); rank 0 must see the loss.
  const uint16_t port = FreePort();
  std::thread t1([&] {
    ExpertParallelOptions o{.rank = 1, .size = 2, .store_port = port, .join_timeout = milliseconds(20000),
                            .timeout = milliseconds(2000)};
    auto g = ExpertParallelGroup::Join(o);
    ASSERT_TRUE(g.ok());
    (*g).reset();  // the peer is gone (its sockets close)
  });
  ExpertParallelOptions o{.rank = 0, .size = 2, .store_port = port, .join_timeout = milliseconds(20000),
                          .timeout = milliseconds(2000)};
  auto g = ExpertParallelGroup::Join(o);
  t1.join();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto any = (*g)->AnyRank(true);
  ASSERT_FALSE(any.ok());
  EXPECT_EQ(any.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE((*g)->status().ok());
  std::vector<int64_t> c(2, 0), rc(2, 0);
  EXPECT_FALSE((*g)->ExchangeCounts(c, rc).ok());  // at once, without the peer
}

TEST(ExpertParallelGroupTest, APeerKilledInTheMiddleOfATransferFailsTheCollectiveAtOnce) {
  // Rank 1 (a child process) posts its receive of 64 MiB of rows from rank 0 and is
  // stopped; rank 0's send then fills the socket and waits to write the rest; rank 1 is
  // killed. Gloo closes the connection but does not wake a send it had started writing
  // (its pair fails only the operations it has not started), so without the group's own
  // peer watch rank 0 would wait out the collective timeout.
  const uint16_t port = FreePort();
  constexpr int64_t kRows = 16384, kWidth = 1024;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ExpertParallelOptions o{.rank = 1, .size = 2, .store_port = port, .join_timeout = milliseconds(20000),
                            .timeout = milliseconds(60000)};
    auto g = ExpertParallelGroup::Join(o);
    if (!g.ok()) ::_exit(3);
    std::vector<float> recv(static_cast<size_t>(kRows * kWidth));
    const int64_t send_rows[2] = {0, 0}, recv_rows[2] = {kRows, 0};
    if (::write(ready[1], "r", 1) != 1) ::_exit(4);
    (void)(*g)->ExchangeRows(nullptr, send_rows, recv.data(), recv_rows, kWidth);
    ::_exit(0);  // not reached: the test kills this process first
  }
  ::close(ready[1]);
  ExpertParallelOptions o{.rank = 0, .size = 2, .store_port = port, .join_timeout = milliseconds(20000),
                          .timeout = milliseconds(30000)};
  auto g = ExpertParallelGroup::Join(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  std::this_thread::sleep_for(milliseconds(300));  // its receive is posted and announced
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, WUNTRACED), child);
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(500));  // rank 0 is blocked writing by then
    ::kill(child, SIGKILL);
  });
  std::vector<float> send(static_cast<size_t>(kRows * kWidth), 1.0f);
  const int64_t send_rows[2] = {0, kRows}, recv_rows[2] = {0, 0};
  Status s = (*g)->ExchangeRows(send.data(), send_rows, nullptr, recv_rows, kWidth);
  killer.join();
  ::waitpid(child, &wstatus, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  // Noticed at once, not by waiting out the 30 s collective timeout. (Usually through the
  // watch, "rank 1 left the group"; should the receive not have been posted before the
  // stop, Gloo fails the send itself, also at once.)
  EXPECT_EQ(s.message().find("Timed out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the rows all-to-all failed"), std::string::npos) << s.message();
}

TEST(ExpertParallelGroupTest, TheGroupReFormsWithARestartedRank) {
  const uint16_t port = FreePort();
  auto options = [&](int rank) {
    ExpertParallelOptions o;
    o.rank = rank;
    o.size = 2;
    o.store_port = port;
    o.join_timeout = milliseconds(20000);
    o.timeout = milliseconds(5000);
    return o;
  };
  std::unique_ptr<ExpertParallelGroup> g1;
  std::thread t1([&] {
    auto g = ExpertParallelGroup::Join(options(1));
    ASSERT_TRUE(g.ok());
    g1 = std::move(g).value();
  });
  auto g0 = ExpertParallelGroup::Join(options(0));
  t1.join();
  ASSERT_TRUE(g0.ok() && g1 != nullptr);
  std::thread both([&] { EXPECT_TRUE(g1->AnyRank(true).ok()); });
  EXPECT_TRUE((*g0)->AnyRank(false).ok());
  both.join();
  g1.reset();  // rank 1 dies
  EXPECT_FALSE((*g0)->AnyRank(true).ok());
  EXPECT_FALSE((*g0)->TryResume());  // nobody to re-form with yet
  // Rank 1 comes back; rank 0 re-forms with it and they run collectives again.
  std::thread restart([&] {
    auto g = ExpertParallelGroup::Join(options(1));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    g1 = std::move(g).value();
  });
  restart.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(*g0)->TryResume() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE((*g0)->status().ok());
  std::thread again([&] {
    auto any = g1->AnyRank(false);
    ASSERT_TRUE(any.ok());
    EXPECT_TRUE(*any);
  });
  auto any = (*g0)->AnyRank(true);
  again.join();
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_TRUE(*any);
}

// The sharded MoE layer gives every rank's tokens the same bits as one rank holding all
// experts — also with a rank that has no tokens (the dummy batch).
void CheckShardedMoeEqualsWhole(const std::string& fixture, int ranks) {
  auto whole = Model::Load(FixturePath(fixture));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const ModelConfig& c = (*whole)->config();
  int layer = -1;
  for (int il = 0; il < c.n_layers && layer < 0; ++il) {
    if (c.layer_is_moe(il)) layer = il;
  }
  ASSERT_GE(layer, 0);
  const int64_t E = c.n_embd;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> x(ranks), expect(ranks);
  for (int r = 0; r < ranks; ++r) {
    const int64_t n = r == 1 ? 0 : 5 + 3 * r;  // rank 1 is idle
    x[r].resize(static_cast<size_t>(n * E));
    for (float& v : x[r]) v = dist(rng);
    expect[r].resize(x[r].size());
    MoeFfn moe(c, nullptr);
    moe.Run((*whole)->weights().layers[layer].moe, x[r].data(), n, expect[r].data());
  }
  std::vector<std::unique_ptr<Model>> shards(ranks);
  for (int r = 0; r < ranks; ++r) {
    ModelLoadOptions lo;
    lo.expert_shard = {r, ranks};
    auto m = Model::Load(FixturePath(fixture), lo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const MatrixStack& gate = (*m)->weights().layers[layer].moe.gate;
    EXPECT_EQ(gate.count, ExpertShard({r, ranks}).Count(c.moe.n_expert));
    shards[r] = std::move(m).value();
  }
  RunRanks(ranks, [&](int r, ExpertParallelGroup* g) {
    const int64_t n = static_cast<int64_t>(x[r].size()) / E;
    std::vector<float> out(x[r].size(), -1.0f);
    MoeFfn moe(shards[r]->config(), nullptr);
    moe.Run(shards[r]->weights().layers[layer].moe, x[r].data(), n, out.data(), g);
    ASSERT_TRUE(g->status().ok()) << g->status().ToString();
    EXPECT_TRUE(out.empty() || std::memcmp(out.data(), expect[r].data(), out.size() * sizeof(float)) == 0)
        << "rank " << r;
    EXPECT_GT(moe.exchange_bytes_sent(), 0);
  });
}

TEST(ExpertParallelMoeTest, TwoRanksGiveTheSameBitsAsOne) { CheckShardedMoeEqualsWhole("qwen3moe-q4_k_m.gguf", 2); }
TEST(ExpertParallelMoeTest, FourRanksGiveTheSameBitsAsOne) { CheckShardedMoeEqualsWhole("glm4moe-q4_k_m.gguf", 4); }

}  // namespace
}  // namespace tandem::dist
