#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace tandem::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlock = 4;  // small blocks keep the arithmetic in tests readable

KvCacheConfig Config(int32_t num_blocks, bool prefix_caching = true) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size_tokens = kBlock;
  c.enable_prefix_caching = prefix_caching;
  c.model_fingerprint = "test-model";
  c.kv_dtype = "f16";
  return c;
}

std::vector<int32_t> Tokens(int32_t n, int32_t start = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Runs a request's whole prompt in one step: lookup, allocate, compute, cache.
// Returns the prefix hit in tokens, or -1 when allocation failed.
int32_t Prefill(KvCacheManager& m, const std::string& id, const std::vector<int32_t>& prompt) {
  ComputedBlocks hit = m.GetComputedBlocks(id, prompt);
  const int32_t n_new = static_cast<int32_t>(prompt.size()) - hit.num_computed_tokens;
  if (!m.AllocateSlots(id, hit.num_computed_tokens, n_new, hit)) return -1;
  m.CacheComputedBlocks(id, prompt, static_cast<int32_t>(prompt.size()));
  return hit.num_computed_tokens;
}

TEST(KvCacheManagerTest, AllocatesBlocksForTokens) {
  KvCacheManager m(Config(8));
  auto fresh = m.AllocateSlots("a", 0, 9);  // 9 tokens -> 3 blocks of 4
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(*fresh, (Ids{0, 1, 2}));
  EXPECT_EQ(m.GetBlockTable("a"), (Ids{0, 1, 2}));
  // Decode: tokens 10..12 still fit in block 2, token 13 needs a new block.
  EXPECT_EQ(m.AllocateSlots("a", 9, 1), Ids{});
  EXPECT_EQ(m.AllocateSlots("a", 10, 2), Ids{});
  EXPECT_EQ(m.AllocateSlots("a", 12, 1), Ids{3});
  // Speculative lookahead slots.
  EXPECT_EQ(m.AllocateSlots("a", 13, 1, {}, 4), Ids{4});
  EXPECT_EQ(m.GetBlockTable("a").size(), 5u);
  EXPECT_TRUE(m.GetBlockTable("unknown").empty());
}

// n > 1: the child shares the parent's full blocks and gets a fresh copy of the partial
// one; freeing either leaves the other's blocks in use.
TEST(KvCacheManagerTest, ForkSharesFullBlocksAndCopiesThePartialOne) {
  KvCacheManager m(Config(8));
  const auto prompt = Tokens(10);  // 2 full blocks + 2 tokens
  ASSERT_EQ(Prefill(m, "p", prompt), 0);
  const Ids parent = m.GetBlockTable("p");
  ASSERT_EQ(parent.size(), 3u);
  auto copy = m.Fork("p", "c", 10);
  ASSERT_TRUE(copy.has_value());
  const Ids child = m.GetBlockTable("c");
  ASSERT_EQ(child.size(), 3u);
  EXPECT_EQ(child[0], parent[0]);
  EXPECT_EQ(child[1], parent[1]);
  EXPECT_NE(child[2], parent[2]);
  EXPECT_EQ(copy->copy_from, parent[2]);
  EXPECT_EQ(copy->copy_to, child[2]);
  EXPECT_EQ(m.pool().ref_count(parent[0]), 2);
  EXPECT_EQ(m.pool().ref_count(parent[2]), 1);
  EXPECT_EQ(m.num_free_blocks(), 4);
  // A fork at a block boundary copies nothing.
  auto aligned = m.Fork("p", "c2", 8);
  ASSERT_TRUE(aligned.has_value());
  EXPECT_EQ(aligned->copy_from, -1);
  EXPECT_EQ(m.GetBlockTable("c2").size(), 2u);
  EXPECT_EQ(m.num_free_blocks(), 4);
  m.Free("p");
  EXPECT_EQ(m.pool().ref_count(parent[0]), 2);  // c and c2
  m.Free("c");
  m.Free("c2");
  EXPECT_EQ(m.num_free_blocks(), 8);
}

TEST(KvCacheManagerTest, ForkWithoutAFreeBlockChangesNothing) {
  KvCacheManager m(Config(3));
  ASSERT_EQ(Prefill(m, "p", Tokens(10)), 0);  // all 3 blocks
  EXPECT_FALSE(m.Fork("p", "c", 10).has_value());
  EXPECT_TRUE(m.GetBlockTable("c").empty());
  EXPECT_EQ(m.pool().ref_count(m.GetBlockTable("p")[0]), 1);
}

TEST(KvCacheManagerTest, AllocationFailureChangesNothing) {
  KvCacheManager m(Config(4));
  ASSERT_TRUE(m.AllocateSlots("a", 0, 12).has_value());  // 3 blocks
  EXPECT_EQ(m.AllocateSlots("b", 0, 8), std::nullopt);   // needs 2, 1 free
  EXPECT_TRUE(m.GetBlockTable("b").empty());
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_EQ(m.AllocateSlots("a", 12, 5), std::nullopt);  // needs 2 more
  EXPECT_EQ(m.GetBlockTable("a").size(), 3u);
  // The scheduler preempts "a"; now "b" fits.
  m.Free("a");
  EXPECT_TRUE(m.AllocateSlots("b", 0, 8).has_value());
  m.Free("a");  // freeing twice is harmless
  EXPECT_TRUE(m.pool().CheckConsistency().ok());
}

TEST(KvCacheManagerTest, PrefixHitAfterFree) {
  KvCacheManager m(Config(16));
  const auto prompt = Tokens(10);  // 2 full blocks + 2 tokens
  EXPECT_EQ(Prefill(m, "a", prompt), 0);
  const Ids table_a = m.GetBlockTable("a");
  m.Free("a");
  EXPECT_EQ(m.usage(), 0.0);

  // Same prompt later: both full blocks hit; the partial block was never cached.
  auto prompt_b = prompt;
  prompt_b.push_back(999);
  ComputedBlocks hit = m.GetComputedBlocks("b", prompt_b);
  EXPECT_EQ(hit.block_ids, (Ids{table_a[0], table_a[1]}));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  auto fresh = m.AllocateSlots("b", 8, 3, hit);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->size(), 1u);
  EXPECT_EQ(m.GetBlockTable("b")[0], table_a[0]);
  EXPECT_EQ(m.GetBlockTable("b")[1], table_a[1]);

  EXPECT_EQ(m.prefix_cache_stats().num_requests, 2);
  EXPECT_EQ(m.prefix_cache_stats().queries_tokens, 10 + 11);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 8);
}

TEST(KvCacheManagerTest, ConcurrentSharingRefCounts) {
  KvCacheManager m(Config(16));
  const auto prompt = Tokens(9);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  ASSERT_EQ(Prefill(m, "b", prompt), 8);  // "a" is still running: shared blocks
  const Ids& ta = m.GetBlockTable("a");
  const Ids& tb = m.GetBlockTable("b");
  EXPECT_EQ(ta[0], tb[0]);
  EXPECT_EQ(ta[1], tb[1]);
  EXPECT_NE(ta[2], tb[2]);  // each has its own partial block
  EXPECT_EQ(m.pool().ref_count(ta[0]), 2);
  m.Free("a");
  EXPECT_EQ(m.pool().ref_count(tb[0]), 1);
  m.Free("b");
  EXPECT_EQ(m.usage(), 0.0);
  EXPECT_TRUE(m.pool().CheckConsistency().ok());
}

TEST(KvCacheManagerTest, NeverHitsTheWholePrompt) {
  KvCacheManager m(Config(16));
  const auto prompt = Tokens(8);  // exactly 2 full blocks
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  // The last token must be recomputed to get logits, so only the first block can hit.
  ComputedBlocks hit = m.GetComputedBlocks("b", prompt);
  EXPECT_EQ(hit.num_computed_tokens, 4);
  ASSERT_TRUE(m.AllocateSlots("b", 4, 4, hit).has_value());
  EXPECT_EQ(m.GetBlockTable("b").size(), 2u);
}

TEST(KvCacheManagerTest, NoHitAfterEviction) {
  KvCacheManager m(Config(3));
  const auto prompt = Tokens(9);  // 3 blocks, 2 of them full
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  // Another request takes every block, evicting the cached ones.
  ASSERT_EQ(Prefill(m, "x", Tokens(12, 5000)), 0);
  m.Free("x");
  EXPECT_EQ(m.GetComputedBlocks("b", prompt).num_computed_tokens, 0);
}

TEST(KvCacheManagerTest, EvictionTakesSequenceTailFirst) {
  KvCacheManager m(Config(4));
  const auto prompt = Tokens(13);  // 3 full blocks + 1 token = 4 blocks
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  // Taking one block evicts the uncached partial block first, then the deepest full block.
  ASSERT_TRUE(m.AllocateSlots("x", 0, 8).has_value());
  EXPECT_EQ(m.GetComputedBlocks("b", prompt).num_computed_tokens, 8);
}

TEST(KvCacheManagerTest, PartialLastBlockNeverCached) {
  KvCacheManager m(Config(8));
  const auto prompt = Tokens(6);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  EXPECT_EQ(m.pool().num_cached(), 1);  // block 0 only
  EXPECT_EQ(m.GetBlockHashes("a").size(), 1u);
}

TEST(KvCacheManagerTest, DecodeCachesBlocksAsTheyFill) {
  KvCacheManager m(Config(8));
  std::vector<int32_t> tokens = Tokens(3);
  ASSERT_EQ(Prefill(m, "a", tokens), 0);
  EXPECT_EQ(m.pool().num_cached(), 0);
  // Decode steps: each computes the previously sampled token and samples a new one.
  int32_t computed = 3;
  for (int32_t step = 0; step < 6; ++step) {
    tokens.push_back(500 + step);  // sampled, not yet computed
    ASSERT_TRUE(m.AllocateSlots("a", computed, 1).has_value());
    ++computed;
    m.CacheComputedBlocks("a", tokens, computed);
    EXPECT_EQ(m.pool().num_cached(), computed / kBlock);
  }
  // A new request with the generated text as its prompt hits the computed full blocks.
  m.Free("a");
  tokens.push_back(7);
  EXPECT_EQ(m.GetComputedBlocks("b", tokens).num_computed_tokens, 8);
}

TEST(KvCacheManagerTest, ChunkedPrefillCachesOnlyComputedBlocks) {
  KvCacheManager m(Config(8));
  const auto prompt = Tokens(14);
  ComputedBlocks hit = m.GetComputedBlocks("a", prompt);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 6, hit).has_value());  // first chunk: 6 tokens
  m.CacheComputedBlocks("a", prompt, 6);
  EXPECT_EQ(m.pool().num_cached(), 1);
  // A request arriving now only sees the computed block.
  EXPECT_EQ(m.GetComputedBlocks("b", prompt).num_computed_tokens, 4);
  m.Free("b");
  ASSERT_TRUE(m.AllocateSlots("a", 6, 8).has_value());
  m.CacheComputedBlocks("a", prompt, 14);
  EXPECT_EQ(m.pool().num_cached(), 3);
  EXPECT_EQ(m.GetComputedBlocks("c", prompt).num_computed_tokens, 12);
}

TEST(KvCacheManagerTest, CacheSaltSeparatesRequests) {
  KvCacheManager m(Config(8));
  const auto prompt = Tokens(9);
  ComputedBlocks hit = m.GetComputedBlocks("a", prompt, "tenant-1");
  ASSERT_TRUE(m.AllocateSlots("a", 0, 9, hit).has_value());
  m.CacheComputedBlocks("a", prompt, 9);
  m.Free("a");
  EXPECT_EQ(m.GetComputedBlocks("b", prompt, "tenant-2").num_computed_tokens, 0);
  EXPECT_EQ(m.GetComputedBlocks("c", prompt, "tenant-1").num_computed_tokens, 8);
}

TEST(KvCacheManagerTest, FreeBlocksAreNotCountedTwice) {
  // The hit blocks are free; allocating the rest must not count them as free supply.
  KvCacheManager m(Config(3));
  const auto prompt = Tokens(9);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  // 3 free blocks, 2 of them are the hit. A 17-token prompt needs 5 blocks: 2 hit + 3 new.
  auto longer = Tokens(17);
  ComputedBlocks hit = m.GetComputedBlocks("b", longer);
  ASSERT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(m.AllocateSlots("b", 8, 9, hit), std::nullopt);
  EXPECT_EQ(m.num_free_blocks(), 3);
  EXPECT_TRUE(m.GetBlockTable("b").empty());
  // 10 tokens need 3 blocks: 2 hit + 1 new, which fits.
  auto ten = Tokens(10);
  m.Free("b");
  hit = m.GetComputedBlocks("b", ten);
  EXPECT_TRUE(m.AllocateSlots("b", 8, 2, hit).has_value());
  EXPECT_EQ(m.num_free_blocks(), 0);
}

TEST(KvCacheManagerDeathTest, StaleHitAborts) {
  // The scheduler must allocate right after the lookup; a hit evicted in between is a bug.
  KvCacheManager m(Config(3));
  const auto prompt = Tokens(9);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  ComputedBlocks hit = m.GetComputedBlocks("b", prompt);
  ASSERT_EQ(hit.num_computed_tokens, 8);
  ASSERT_TRUE(m.AllocateSlots("x", 0, 12).has_value());  // evicts the hit blocks
  EXPECT_DEATH(m.AllocateSlots("b", 8, 1, hit), "stale prefix hit");
}

TEST(KvCacheManagerTest, PrefixCachingDisabled) {
  KvCacheManager m(Config(8, /*prefix_caching=*/false));
  const auto prompt = Tokens(9);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  EXPECT_EQ(Prefill(m, "b", prompt), 0);
  EXPECT_EQ(m.pool().num_cached(), 0);
  EXPECT_EQ(m.prefix_cache_stats().num_requests, 0);
  EXPECT_TRUE(m.GetBlockHashes("b").empty());
}

TEST(KvCacheManagerTest, ResetPrefixCache) {
  KvCacheManager m(Config(8));
  const auto prompt = Tokens(9);
  ASSERT_EQ(Prefill(m, "a", prompt), 0);
  m.Free("a");
  EXPECT_EQ(m.ResetPrefixCache(), 2u);
  EXPECT_EQ(m.GetComputedBlocks("b", prompt).num_computed_tokens, 0);
}

TEST(KvCacheManagerTest, UsageReturnsToZero) {
  KvCacheManager m(Config(32));
  for (int i = 0; i < 6; ++i) {
    ASSERT_GE(Prefill(m, "r" + std::to_string(i), Tokens(10 + i, i % 2 ? 100 : 7000)), 0);
  }
  EXPECT_GT(m.usage(), 0.0);
  for (int i = 0; i < 6; ++i) m.Free("r" + std::to_string(i));
  EXPECT_EQ(m.usage(), 0.0);
  EXPECT_EQ(m.num_free_blocks(), 32);
  EXPECT_EQ(m.num_requests(), 0u);
}

// A scheduler-shaped random workload: requests from a few shared prefixes arrive, prefill in
// chunks, decode, get preempted when blocks run out, and finish. After every step the pool's
// invariants hold and its ref counts equal the number of tables holding each block.
TEST(KvCacheManagerTest, RandomizedSchedulerStress) {
  constexpr int32_t kBlocks = 48;
  KvCacheManager m(Config(kBlocks));
  std::mt19937 rng(777);
  auto rand_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) prefixes.push_back(Tokens(rand_int(4, 20), 1000 * (p + 1)));

  struct Req {
    std::vector<int32_t> tokens;
    int32_t num_computed = 0;
    bool running = false;
  };
  std::map<std::string, Req> reqs;
  int next_id = 0;
  int64_t total_hits = 0;

  for (int step = 0; step < 5000; ++step) {
    const int op = rand_int(0, 9);
    if (op <= 1 && reqs.size() < 12) {
      Req r;
      r.tokens = prefixes[static_cast<size_t>(rand_int(0, 3))];
      const int suffix = rand_int(0, 10);
      for (int i = 0; i < suffix; ++i) r.tokens.push_back(rand_int(0, 50));
      reqs.emplace("q" + std::to_string(next_id++), std::move(r));
    } else if (op <= 7 && !reqs.empty()) {
      auto it = reqs.begin();
      std::advance(it, rand_int(0, static_cast<int>(reqs.size()) - 1));
      const std::string& id = it->first;
      Req& r = it->second;
      ComputedBlocks hit;
      if (!r.running) {
        hit = m.GetComputedBlocks(id, r.tokens);
        r.num_computed = hit.num_computed_tokens;
        total_hits += hit.num_computed_tokens;
      }
      const int32_t remaining = static_cast<int32_t>(r.tokens.size()) - r.num_computed;
      const int32_t n_new = std::min(remaining, rand_int(1, 9));  // chunked prefill / decode
      const int32_t free_before = m.num_free_blocks();
      auto fresh = m.AllocateSlots(id, r.num_computed, n_new, hit);
      if (!fresh) {
        // Preempt by recompute: release everything, start over later.
        ASSERT_EQ(m.num_free_blocks(), free_before);
        m.Free(id);
        r.running = false;
        r.num_computed = 0;
        continue;
      }
      r.running = true;
      r.num_computed += n_new;
      if (r.num_computed == static_cast<int32_t>(r.tokens.size())) {
        r.tokens.push_back(rand_int(0, 50));  // sample the next token
      }
      m.CacheComputedBlocks(id, r.tokens, r.num_computed);
      const auto& table = m.GetBlockTable(id);
      ASSERT_GE(static_cast<int64_t>(table.size()) * kBlock, r.num_computed);
    } else if (!reqs.empty()) {
      auto it = reqs.begin();
      std::advance(it, rand_int(0, static_cast<int>(reqs.size()) - 1));
      m.Free(it->first);
      reqs.erase(it);
    }

    ASSERT_TRUE(m.pool().CheckConsistency().ok()) << m.pool().CheckConsistency().ToString();
    std::vector<int32_t> holders(kBlocks, 0);
    for (const auto& [id, r] : reqs) {
      const auto& table = m.GetBlockTable(id);
      if (!r.running) {
        ASSERT_TRUE(table.empty());
      }
      for (int32_t b : table) ++holders[b];
      // Every registered block of a running request is findable under its own hash.
      const auto& hashes = m.GetBlockHashes(id);
      for (size_t i = 0; i < table.size() && i < hashes.size(); ++i) {
        if (auto cached = m.pool().CachedHash(table[i])) {
          ASSERT_EQ(*cached, hashes[i]);
        }
      }
    }
    for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(m.pool().ref_count(b), holders[b]);
  }
  EXPECT_GT(total_hits, 0);  // the workload did exercise prefix sharing
  for (const auto& [id, r] : reqs) m.Free(id);
  EXPECT_EQ(m.usage(), 0.0);
  EXPECT_TRUE(m.pool().CheckConsistency().ok());
}

}  // namespace
}  // namespace tandem::kv
