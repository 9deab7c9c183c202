#include "pool/arena_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tandem::pool {
namespace {

TEST(ArenaAllocatorTest, AllocatesAlignedAndCoalesces) {
  ArenaAllocator a(1024);
  auto x = a.Allocate(100);
  auto y = a.Allocate(64);
  auto z = a.Allocate(1);
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(*x % 64, 0u);
  EXPECT_EQ(a.used_bytes(), 128u + 64 + 64);
  EXPECT_FALSE(a.Allocate(1024));
  a.Free(*y, 64);
  a.Free(*x, 100);
  a.Free(*z, 1);
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_EQ(a.num_free_ranges(), 1u);  // everything merged back
  EXPECT_TRUE(a.Allocate(1024));
}

TEST(ArenaAllocatorTest, RandomizedNeverOverlaps) {
  ArenaAllocator a(1 << 20);
  std::mt19937 rng(7);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t size = 1 + rng() % 20000;
      auto off = a.Allocate(size);
      if (!off) continue;
      for (auto& [o, s] : live) {
        ASSERT_TRUE(*off + ArenaAllocator::Rounded(size) <= o ||
                    o + ArenaAllocator::Rounded(s) <= *off);
      }
      live.emplace_back(*off, size);
    } else {
      size_t i = rng() % live.size();
      a.Free(live[i].first, live[i].second);
      live.erase(live.begin() + i);
    }
  }
  for (auto& [o, s] : live) a.Free(o, s);
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_EQ(a.num_free_ranges(), 1u);
}

}  // namespace
}  // namespace tandem::pool
