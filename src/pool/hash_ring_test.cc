#include "pool/hash_ring.h"

#include <gtest/gtest.h>

#include <map>

namespace tandem::pool {
namespace {

TEST(HashRingTest, SameMembersSameOwnersInAnyOrder) {
  HashRing a({"127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1"});
  HashRing b({"127.0.0.3:1", "127.0.0.1:1", "127.0.0.2:1", "127.0.0.1:1"});
  EXPECT_EQ(a.members(), b.members());
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(a.Owner("k" + std::to_string(i)), b.Owner("k" + std::to_string(i)));
}

TEST(HashRingTest, SpreadsKeysAndMovesFewOnLeave) {
  HashRing three({"a:1", "b:1", "c:1"});
  HashRing two({"a:1", "b:1"});
  std::map<std::string, int> counts;
  int moved = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string key = "m@tp0@" + std::to_string(i);
    const std::string& owner = three.Owner(key);
    ++counts[owner];
    if (owner != "c:1" && two.Owner(key) != owner) ++moved;
  }
  for (auto& [m, n] : counts) EXPECT_GT(n, 600) << m;  // roughly a third each
  EXPECT_EQ(moved, 0);                                 // only c's keys move when c leaves
  EXPECT_EQ(HashRing({}).Owner("x"), "");
}

}  // namespace
}  // namespace tandem::pool
