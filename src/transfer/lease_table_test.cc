#include "transfer/lease_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tandem::transfer {
namespace {

using std::chrono::milliseconds;

TEST(LeaseTableTest, DoneFreesAndForeignBlocksAreRefused) {
  std::atomic<int> changes{0};
  LeaseTable t(milliseconds(30000), milliseconds(480000), [&] { changes++; });
  ASSERT_TRUE(t.Keep("a", {5, 2, 9}).ok());
  EXPECT_EQ(t.Keep("a", {1}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(t.Acquire("a", std::vector<int32_t>{2, 3}).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(t.Acquire("b", std::vector<int32_t>{2}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(t.Acquire("a", std::vector<int32_t>{9, 2}).ok());
  EXPECT_TRUE(t.TakeFreeable().empty());
  EXPECT_TRUE(t.Release("a"));
  EXPECT_TRUE(t.TakeFreeable().empty()) << "pinned: never freed under a reader";
  EXPECT_EQ(t.Acquire("a", std::vector<int32_t>{2}).code(), StatusCode::kNotFound) << "released";
  t.Unpin("a");
  EXPECT_EQ(t.TakeFreeable(), std::vector<std::string>{"a"});
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.Release("a"));
  EXPECT_GE(changes.load(), 2);
}

TEST(LeaseTableTest, ExpiryRenewalAndHardCap) {
  LeaseTable t(milliseconds(100), milliseconds(250), nullptr);
  const auto t0 = LeaseTable::Clock::now();
  ASSERT_TRUE(t.Keep("a", {1}).ok());
  ASSERT_TRUE(t.Keep("b", {2}).ok());
  ASSERT_TRUE(t.NextDeadline().has_value());
  EXPECT_LE(*t.NextDeadline(), t0 + milliseconds(150));
  EXPECT_TRUE(t.TakeFreeable(t0 + milliseconds(50)).empty());
  // Expired leases are freed; a renewal moves the deadline but never past the cap.
  std::vector<std::string> freed = t.TakeFreeable(LeaseTable::Clock::now() + milliseconds(200));
  EXPECT_EQ(freed.size(), 2u);

  // On a clock the test controls (sleeping made this flaky on a loaded machine).
  const auto t1 = LeaseTable::Clock::now() + milliseconds(1000);
  ASSERT_TRUE(t.Keep("c", {3}, t1).ok());
  for (int i = 1; i <= 4; ++i) t.Renew("c", t1 + milliseconds(60 * i));
  // 240 ms in: renewals kept it alive past the 100 ms lease...
  EXPECT_TRUE(t.TakeFreeable(t1 + milliseconds(245)).empty());
  // ... but the last renewal's deadline (340 ms) was capped at 250 ms.
  EXPECT_EQ(t.TakeFreeable(t1 + milliseconds(251)), std::vector<std::string>{"c"});
  // An expired lease is not renewed.
  ASSERT_TRUE(t.Keep("d", {4}, t1).ok());
  t.Renew("d", t1 + milliseconds(300));
  EXPECT_EQ(t.TakeFreeable(t1 + milliseconds(301)), std::vector<std::string>{"d"});
}

TEST(LeaseTableTest, PinnedExpiredLeaseIsAnnouncedOnUnpin) {
  std::atomic<int> changes{0};
  LeaseTable t(milliseconds(20), milliseconds(20), [&] { changes++; });
  ASSERT_TRUE(t.Keep("a", {1}).ok());
  ASSERT_TRUE(t.Acquire("a", std::vector<int32_t>{1}).ok());
  std::this_thread::sleep_for(milliseconds(40));
  EXPECT_FALSE(t.NextDeadline().has_value()) << "pinned leases are not polled";
  EXPECT_TRUE(t.TakeFreeable().empty());
  t.Unpin("a");
  EXPECT_EQ(changes.load(), 1);
  EXPECT_EQ(t.TakeFreeable().size(), 1u);
}

}  // namespace
}  // namespace tandem::transfer
