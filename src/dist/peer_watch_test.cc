#include "dist/peer_watch.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "dist/dist_test_util.h"
#include "dist/rendezvous_store.h"

namespace tandem::dist {
namespace {

using std::chrono::milliseconds;

// `size` watches on 127.0.0.1, one thread each joining through one store.
std::vector<std::unique_ptr<PeerWatch>> ConnectWatches(int size, uint16_t port) {
  std::vector<std::unique_ptr<PeerWatch>> watches(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto client = RendezvousStoreClient::Connect("127.0.0.1", port, milliseconds(10000));
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      auto w = PeerWatch::Connect(r, size, "127.0.0.1", **client, "test/watch", milliseconds(10000));
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      watches[r] = std::move(w).value();
    });
  }
  for (auto& t : threads) t.join();
  return watches;
}

TEST(PeerWatchTest, EveryRankSeesARankThatLeaves) {
  auto store = RendezvousStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(store.ok());
  auto watches = ConnectWatches(3, (*store)->port());
  ASSERT_EQ(watches.size(), 3u);
  for (auto& w : watches) {
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->lost_peer(), -1);
  }
  std::promise<int> seen_by_0;
  ASSERT_TRUE(watches[0]->Arm([&](int peer) { seen_by_0.set_value(peer); }));
  watches[1].reset();  // rank 1 leaves: its connections close
  auto f = seen_by_0.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get(), 1);
  EXPECT_EQ(watches[0]->lost_peer(), 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (watches[2]->lost_peer() < 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(watches[2]->lost_peer(), 1);
  // Once a rank is gone, arming says so instead of waiting for a callback that never comes.
  EXPECT_FALSE(watches[2]->Arm([](int) {}));
  watches[0]->Disarm();
}

TEST(PeerWatchTest, ARankThatNeverComesTimesOut) {
  auto store = RendezvousStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(store.ok());
  auto client = RendezvousStoreClient::Connect("127.0.0.1", (*store)->port(), milliseconds(10000));
  ASSERT_TRUE(client.ok());
  auto w = PeerWatch::Connect(0, 2, "127.0.0.1", **client, "test/watch", milliseconds(300));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(PeerWatchTest, InterfaceAddressOfLoopback) {
  auto a = InterfaceAddress("lo");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_EQ(InterfaceAddress("no-such-if0").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::dist
