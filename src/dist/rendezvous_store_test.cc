#include "dist/rendezvous_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "dist/dist_test_util.h"

namespace tandem::dist {
namespace {

using std::chrono::milliseconds;

TEST(RendezvousStoreTest, SetThenGetAndGetWaitsForALaterSet) {
  auto server = RendezvousStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto a = RendezvousStoreClient::Connect("127.0.0.1", (*server)->port(), milliseconds(2000));
  auto b = RendezvousStoreClient::Connect("127.0.0.1", (*server)->port(), milliseconds(2000));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Set("k", std::string("v\0w", 3)).ok());
  auto v = (*b)->Get("k", milliseconds(100));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::string("v\0w", 3));

  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE((*a)->Set("late", "x").ok());
  });
  auto late = (*b)->Get("late", milliseconds(5000));
  later.join();
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(*late, "x");
}

TEST(RendezvousStoreTest, AddCountsAcrossClients) {
  auto server = RendezvousStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto a = RendezvousStoreClient::Connect("127.0.0.1", (*server)->port(), milliseconds(2000));
  auto b = RendezvousStoreClient::Connect("127.0.0.1", (*server)->port(), milliseconds(2000));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*(*a)->Add("joins", 1), 1);
  EXPECT_EQ(*(*b)->Add("joins", 1), 2);
  EXPECT_EQ(*(*a)->Add("joins", 5), 7);
  EXPECT_EQ(*(*b)->Get("joins", milliseconds(10)), "7");
}

TEST(RendezvousStoreTest, GetOfAMissingKeyTimesOutNamingIt) {
  auto server = RendezvousStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = RendezvousStoreClient::Connect("127.0.0.1", (*server)->port(), milliseconds(2000));
  ASSERT_TRUE(c.ok());
  auto v = (*c)->Get("nobody", milliseconds(50));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("nobody"), std::string::npos);
}

TEST(RendezvousStoreTest, AClientStartedFirstWaitsForTheServer) {
  const uint16_t port = FreePort();
  std::unique_ptr<RendezvousStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto s = RendezvousStoreServer::Start("127.0.0.1", port);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(s).value();
  });
  auto c = RendezvousStoreClient::Connect("127.0.0.1", port, milliseconds(10000));
  starter.join();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->Set("a", "b").ok());
}

TEST(RendezvousStoreTest, NothingAnsweringIsDeadlineExceededNamingTheAddress) {
  const uint16_t port = FreePort();
  auto c = RendezvousStoreClient::Connect("127.0.0.1", port, milliseconds(300));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

}  // namespace
}  // namespace tandem::dist
