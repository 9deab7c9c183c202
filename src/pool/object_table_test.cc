#include "pool/object_table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tandem::pool
