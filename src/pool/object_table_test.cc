#include "pool/object_table.h"

#include <gtest/gtest.h>

#include <thread>

namespace tandem::pool {
namespace {

TEST(ObjectTableTest, UnsealedIsInvisibleUntilSealed) {
  ObjectTable t(1 << 20);
  uint64_t off = 0;
  ASSERT_EQ(t.Allocate("a", 100, true, &off, nullptr), AllocCode::kAllocated);
  EXPECT_FALSE(t.Exists("a"));
  EXPECT_FALSE(t.LookupAndPin("a"));
  EXPECT_EQ(t.Allocate("a", 100, true, &off, nullptr), AllocCode::kExists);
  EXPECT_TRUE(t.Seal("a"));
  EXPECT_FALSE(t.Seal("a"));
  EXPECT_TRUE(t.Exists("a"));
  auto loc = t.LookupAndPin("a");
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc->size, 100u);
  t.Unpin("a");
  ASSERT_EQ(t.Allocate("b", 100, true, &off, nullptr), AllocCode::kAllocated);
  EXPECT_TRUE(t.Abort("b"));
  EXPECT_EQ(t.stats().objects, 1u);
}

TEST(ObjectTableTest, RejectsInvalid) {
  ObjectTable t(1 << 20);
  uint64_t off = 0;
  EXPECT_EQ(t.Allocate("", 10, true, &off, nullptr), AllocCode::kInvalid);
  EXPECT_EQ(t.Allocate("a", 0, true, &off, nullptr), AllocCode::kInvalid);
  EXPECT_EQ(t.Allocate("a", 2 << 20, true, &off, nullptr), AllocCode::kNoSpace);
}

TEST(ObjectTableTest, WatermarkEvictionIsLruAndSkipsPinned) {
  const uint64_t kObj = 1024;
  ObjectTable t(100 * kObj);  // high 90 objects, low 80
  uint64_t off = 0;
  for (int i = 0; i < 90; ++i) {
    std::string k = "k" + std::to_string(i);
    ASSERT_EQ(t.Allocate(k, kObj, true, &off, nullptr), AllocCode::kAllocated);
    t.Seal(k);
  }
  ASSERT_TRUE(t.LookupAndPin("k0"));  // pinned: must survive
  ASSERT_TRUE(t.LookupAndPin("k1"));
  t.Unpin("k1");  // used recently: survives
  EXPECT_EQ(t.stats().evictions, 0u);
  std::vector<std::string> evicted;
  ASSERT_EQ(t.Allocate("new", kObj, true, &off, &evicted), AllocCode::kAllocated);
  auto st = t.stats();
  EXPECT_LE(st.used_bytes, 80 * kObj + kObj);
  EXPECT_EQ(st.evictions, evicted.size());
  EXPECT_GE(evicted.size(), 10u);
  EXPECT_TRUE(t.Exists("k0"));
  EXPECT_TRUE(t.Exists("k1"));
  EXPECT_FALSE(t.Exists("k2"));  // the least recently used went first
  EXPECT_TRUE(t.Exists("k89"));
}

TEST(ObjectTableTest, AllPinnedMeansNoSpaceNotEviction) {
  ObjectTable t(10 * 1024);
  uint64_t off = 0;
  for (int i = 0; i < 10; ++i) {
    std::string k = "k" + std::to_string(i);
    ASSERT_EQ(t.Allocate(k, 1024, true, &off, nullptr), AllocCode::kAllocated);
    t.Seal(k);
    t.LookupAndPin(k);
  }
  EXPECT_EQ(t.Allocate("x", 1024, true, &off, nullptr), AllocCode::kNoSpace);
  EXPECT_EQ(t.stats().objects, 10u);
}

// Fills a 10-object table (high 9, low 8) with k0..k8, sealed, least recent first.
void Fill(ObjectTable& t, uint64_t obj_bytes) {
  uint64_t off = 0;
  for (int i = 0; i < 9; ++i) {
    std::string k = "k" + std::to_string(i);
    ASSERT_EQ(t.Allocate(k, obj_bytes, true, &off, nullptr), AllocCode::kAllocated);
    t.Seal(k);
  }
}

TEST(ObjectTableTest, ReadLeaseKeepsAnObjectUntilItExpires) {
  ObjectTable leased(10 * 1024, 0.9, 0.8, std::chrono::hours(1));
  Fill(leased, 1024);
  ASSERT_TRUE(leased.LookupAndPin("k0"));
  leased.Unpin("k0");
  ASSERT_TRUE(leased.LookupAndPin("k1"));
  leased.Unpin("k1");
  uint64_t off = 0;
  std::vector<std::string> evicted;
  ASSERT_EQ(leased.Allocate("new", 1024, true, &off, &evicted), AllocCode::kAllocated);
  EXPECT_TRUE(leased.Exists("k0"));  // unpinned but leased
  EXPECT_TRUE(leased.Exists("k1"));
  EXPECT_FALSE(leased.Exists("k2"));

  ObjectTable unleased(10 * 1024, 0.9, 0.8, std::chrono::milliseconds(0));
  Fill(unleased, 1024);
  ASSERT_TRUE(unleased.LookupAndPin("k0"));
  unleased.Unpin("k0");
  // Without a lease, only recency protects it: k0 is now most recent, k1 goes first.
  ASSERT_EQ(unleased.Allocate("new", 1024, true, &off, &evicted), AllocCode::kAllocated);
  EXPECT_TRUE(unleased.Exists("k0"));
  EXPECT_FALSE(unleased.Exists("k1"));
}

TEST(ObjectTableTest, SoftPinnedObjectsGoLastAndExpire) {
  ObjectTable t(10 * 1024, 0.9, 0.8, std::chrono::milliseconds(0));
  Fill(t, 1024);
  EXPECT_TRUE(t.SoftPin("k0", std::chrono::hours(1)));
  EXPECT_TRUE(t.SoftPin("k1", std::chrono::milliseconds(1)));
  EXPECT_FALSE(t.SoftPin("absent", std::chrono::hours(1)));
  EXPECT_EQ(t.stats().soft_pinned, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // k1's pin expires
  uint64_t off = 0;
  std::vector<std::string> evicted;
  ASSERT_EQ(t.Allocate("new", 1024, true, &off, &evicted), AllocCode::kAllocated);
  EXPECT_TRUE(t.Exists("k0"));   // soft-pinned: skipped although least recently used
  EXPECT_FALSE(t.Exists("k1"));  // its pin expired
  EXPECT_FALSE(t.Exists("k2"));
  // When only soft-pinned objects are left to evict, they go too.
  ObjectTable all(10 * 1024, 0.9, 0.8, std::chrono::milliseconds(0));
  Fill(all, 1024);
  for (int i = 0; i < 9; ++i) all.SoftPin("k" + std::to_string(i), std::chrono::hours(1));
  EXPECT_EQ(all.Allocate("new", 1024, true, &off, &evicted), AllocCode::kAllocated);
  EXPECT_FALSE(all.Exists("k0"));
}

TEST(ObjectTableTest, SpillHookKeepsEvictedPrimariesAnnounced) {
  ObjectTable t(10 * 1024, 0.9, 0.8, std::chrono::milliseconds(0));
  std::vector<std::pair<std::string, uint64_t>> seen;
  t.SetSpillHook([&](const std::string& key, uint64_t, uint64_t size) {
    seen.emplace_back(key, size);
    return key != "k1";  // k1's spill is "dropped"
  });
  Fill(t, 1024);
  uint64_t off = 0;
  std::vector<std::string> evicted;
  ASSERT_EQ(t.Allocate("new", 1024, true, &off, &evicted), AllocCode::kAllocated);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, "k0");
  EXPECT_EQ(seen[0].second, 1024u);
  EXPECT_EQ(evicted, std::vector<std::string>{"k1"});  // only the one not spilled
  EXPECT_EQ(t.stats().spilled, 1u);
}

}  // namespace
}  // namespace tandem::pool
