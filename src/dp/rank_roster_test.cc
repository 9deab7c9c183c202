#include "dp/rank_roster.h"

#include <gtest/gtest.h>

namespace tandem::dp {
namespace {

TEST(RankRoster, AcceptsRanksInRangeOnly) {
  RankRoster roster(3);
  auto change = roster.Register(0, {"127.0.0.1", 8001});
  ASSERT_TRUE(change.ok());
  EXPECT_TRUE(change->added);
  EXPECT_FALSE(roster.Register(3, {"h", 1}).ok());
  EXPECT_FALSE(roster.Register(-1, {"h", 1}).ok());
  EXPECT_NE(
      std::string(roster.Register(7, {"h", 1}).status().message()).find("--data-parallel-size"),
      std::string::npos);
  EXPECT_EQ(roster.ranks().size(), 1u);
}

TEST(RankRoster, ReRegistrationIsIdempotentAndAMoveReplaces) {
  RankRoster roster(2);
  ASSERT_TRUE(roster.Register(1, {"10.0.0.2", 8002}).ok());
  auto again = roster.Register(1, {"10.0.0.2", 8002});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  auto moved = roster.Register(1, {"10.0.0.3", 8002});
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(moved->added);
  ASSERT_TRUE(moved->replaced.has_value());
  EXPECT_EQ(moved->replaced->host, "10.0.0.2");
  EXPECT_EQ(roster.Find(1)->host, "10.0.0.3");
  EXPECT_FALSE(roster.Find(0).has_value());
}

TEST(RankRoster, RegistrationWireFormatRoundTrips) {
  RankRegistration r{2, {"10.0.0.2", 8003}, false};
  auto parsed = ParseRankRegistration(RankRegistrationBody(r));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->rank, 2);
  EXPECT_EQ(parsed->address.Key(), "10.0.0.2:8003");
  EXPECT_FALSE(parsed->up);
  for (const char* bad :
       {R"({"address":"h:1"})", R"({"rank":"1","address":"h:1"})", R"({"rank":1})",
        R"({"rank":1,"address":"nope"})", R"({"rank":1,"address":"h:1","state":"sideways"})"}) {
    EXPECT_FALSE(ParseRankRegistration(bad).ok()) << bad;
  }
  auto up = ParseRankRegistration(R"({"rank":0,"address":"[::1]:8001"})");
  ASSERT_TRUE(up.ok());
  EXPECT_TRUE(up->up);
  EXPECT_EQ(up->address.host, "::1");
}

}  // namespace
}  // namespace tandem::dp
