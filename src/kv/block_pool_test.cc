#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace tandem::kv {
namespace {

BlockHash H(uint64_t n) { return BlockHash{n * 0x9e3779b97f4a7c15ULL + 1, n}; }

using Ids = std::vector<int32_t>;

TEST(BlockPoolTest, AllocateIsAllOrNothing) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.Allocate(0), Ids{});
  EXPECT_EQ(pool.Allocate(5), std::nullopt);
  EXPECT_EQ(pool.num_free(), 4);  // the failed call took nothing
  auto a = pool.Allocate(3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (Ids{0, 1, 2}));
  EXPECT_EQ(pool.Allocate(2), std::nullopt);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.Allocate(1), Ids{3});
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, RefCountingAndUsage) {
  BlockPool pool(4);
  EXPECT_EQ(pool.usage(), 0.0);
  Ids a = *pool.Allocate(2);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.5);
  pool.Touch(a);  // a second owner shares both blocks
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  pool.Free(a);
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.num_free(), 2);  // still held by the other owner
  pool.Free(a);
  EXPECT_EQ(pool.ref_count(a[0]), 0);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.usage(), 0.0);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, EmptyPool) {
  BlockPool pool(0);
  EXPECT_EQ(pool.usage(), 0.0);
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  EXPECT_EQ(pool.Allocate(0), Ids{});
}

TEST(BlockPoolTest, LruReuseOrder) {
  BlockPool pool(4);
  Ids a = *pool.Allocate(4);
  // Free in the order 2, 0, 3, 1: allocation must hand them back in that order.
  pool.Free(Ids{2, 0});
  pool.Free(Ids{3, 1});
  EXPECT_EQ(*pool.Allocate(1), Ids{2});
  EXPECT_EQ(*pool.Allocate(3), (Ids{0, 3, 1}));
}

TEST(BlockPoolTest, FreedBlockStaysCachedUntilEvicted) {
  BlockPool pool(3);
  Ids a = *pool.Allocate(2);
  EXPECT_TRUE(pool.CacheFullBlock(a[0], H(1)));
  EXPECT_TRUE(pool.CacheFullBlock(a[1], H(2)));
  EXPECT_TRUE(pool.CacheFullBlock(a[1], H(2)));  // idempotent
  EXPECT_EQ(pool.num_cached(), 2);
  // Free tail first, as a sequence does.
  pool.Free(Ids{a[1], a[0]});
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.LookupCached(H(1)), a[0]);
  EXPECT_EQ(pool.LookupCached(H(2)), a[1]);

  // Free list order is now: 2 (never used), a[1], a[0]. One allocation takes the unused block.
  Ids b = *pool.Allocate(1);
  EXPECT_EQ(b, Ids{2});
  EXPECT_EQ(pool.num_cached(), 2);
  // The next takes the sequence's tail block a[1] and evicts its hash; the prefix survives.
  Ids c = *pool.Allocate(1);
  EXPECT_EQ(c, Ids{a[1]});
  EXPECT_EQ(pool.LookupCached(H(2)), std::nullopt);
  EXPECT_EQ(pool.CachedHash(a[1]), std::nullopt);
  EXPECT_EQ(pool.LookupCached(H(1)), a[0]);
  EXPECT_EQ(pool.num_evictions(), 1);

  // A prefix hit revives the free cached block: it leaves the free list.
  pool.Touch(Ids{a[0]});
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.Allocate(1), std::nullopt);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, DuplicateContentKeepsFirstBlock) {
  BlockPool pool(2);
  Ids a = *pool.Allocate(2);
  EXPECT_TRUE(pool.CacheFullBlock(a[0], H(7)));
  EXPECT_FALSE(pool.CacheFullBlock(a[1], H(7)));
  EXPECT_EQ(pool.LookupCached(H(7)), a[0]);
  EXPECT_EQ(pool.CachedHash(a[1]), std::nullopt);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolTest, ResetPrefixCache) {
  BlockPool pool(3);
  Ids a = *pool.Allocate(2);
  pool.CacheFullBlock(a[0], H(1));
  pool.CacheFullBlock(a[1], H(2));
  pool.Free(Ids{a[1]});
  EXPECT_EQ(pool.ResetPrefixCache(), 2u);
  EXPECT_EQ(pool.LookupCached(H(1)), std::nullopt);
  EXPECT_EQ(pool.LookupCached(H(2)), std::nullopt);
  EXPECT_EQ(pool.ref_count(a[0]), 1);  // owners keep their blocks
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

TEST(BlockPoolDeathTest, MisuseAborts) {
  BlockPool pool(2);
  Ids a = *pool.Allocate(1);
  pool.Free(a);
  EXPECT_DEATH(pool.Free(a), "double free");
  EXPECT_DEATH(pool.Touch(Ids{2}), "out of range");
  EXPECT_DEATH(pool.CacheFullBlock(a[0], H(1)), "caching free block");
}

// Thousands of random operations against a model of the expected ref counts, checking every
// invariant after each step.
TEST(BlockPoolTest, RandomizedStress) {
  constexpr int32_t kBlocks = 64;
  constexpr int kHashUniverse = 96;  // small, so duplicates and re-caching happen
  BlockPool pool(kBlocks);
  std::mt19937 rng(12345);
  std::vector<int32_t> refs;               // one entry per reference held by the test
  std::vector<int32_t> model(kBlocks, 0);  // expected ref_count per block
  auto rand_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  for (int step = 0; step < 20000; ++step) {
    const int op = rand_int(0, 4);
    if (op == 0) {
      const int32_t n = rand_int(0, 12);
      const int32_t free_before = pool.num_free();
      auto got = pool.Allocate(n);
      ASSERT_EQ(got.has_value(), n <= free_before);
      if (got) {
        ASSERT_EQ(static_cast<int32_t>(got->size()), n);
        for (int32_t id : *got) {
          ASSERT_EQ(model[id], 0) << "allocated a block in use";
          ASSERT_EQ(pool.CachedHash(id), std::nullopt) << "allocated block kept its hash";
          model[id] = 1;
          refs.push_back(id);
        }
      } else {
        ASSERT_EQ(pool.num_free(), free_before);
      }
    } else if (op == 1 && !refs.empty()) {
      // Free a random handful of held references.
      const int n = rand_int(1, std::min<int>(8, static_cast<int>(refs.size())));
      std::vector<int32_t> to_free;
      for (int i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(rand_int(0, static_cast<int>(refs.size()) - 1));
        to_free.push_back(refs[k]);
        refs[k] = refs.back();
        refs.pop_back();
      }
      pool.Free(to_free);
      for (int32_t id : to_free) --model[id];
    } else if (op == 2 && !refs.empty()) {
      const int32_t id = refs[static_cast<size_t>(rand_int(0, static_cast<int>(refs.size()) - 1))];
      const BlockHash h = H(static_cast<uint64_t>(rand_int(0, kHashUniverse - 1)));
      const auto before_block = pool.LookupCached(h);
      const auto before_hash = pool.CachedHash(id);
      if (before_hash && *before_hash != h) continue;  // precondition: at most one hash
      const bool cached = pool.CacheFullBlock(id, h);
      ASSERT_EQ(cached, !before_block || *before_block == id);
    } else if (op == 3) {
      // Prefix hit on a random hash.
      const BlockHash h = H(static_cast<uint64_t>(rand_int(0, kHashUniverse - 1)));
      if (auto id = pool.LookupCached(h)) {
        ASSERT_EQ(pool.CachedHash(*id), h);
        pool.Touch(std::vector<int32_t>{*id});
        ++model[*id];
        refs.push_back(*id);
      }
    } else if (op == 4 && rand_int(0, 200) == 0) {
      pool.ResetPrefixCache();
      ASSERT_EQ(pool.num_cached(), 0);
    }

    ASSERT_TRUE(pool.CheckConsistency().ok()) << pool.CheckConsistency().ToString();
    int32_t expected_free = 0;
    for (int32_t id = 0; id < kBlocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), model[id]) << "block " << id;
      expected_free += model[id] == 0;
    }
    ASSERT_EQ(pool.num_free(), expected_free);
    ASSERT_DOUBLE_EQ(pool.usage(), static_cast<double>(kBlocks - expected_free) / kBlocks);
  }
  pool.Free(refs);
  EXPECT_EQ(pool.num_free(), kBlocks);
  EXPECT_EQ(pool.usage(), 0.0);
  EXPECT_TRUE(pool.CheckConsistency().ok());
}

}  // namespace
}  // namespace tandem::kv
