// Tests of the etcd client against a real etcd started by the test (skipped when the
// etcd binary is missing), including etcd being killed and restarted.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "etcd/base64.h"
#include "etcd/etcd_test_server.h"
#include "etcd/faulty_etcd_client.h"
#include "etcd/http_etcd_client.h"
#include "etcd/prefix_watcher.h"

namespace tandem::etcd {
namespace {

using namespace std::chrono_literals;

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

TEST(Base64Test, RoundTripsAllLengths) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    auto decoded = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, bytes);
    bytes += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("/a/b"), "L2EvYg==");
}

TEST(Base64Test, RejectsMalformed) {
  EXPECT_FALSE(Base64Decode("abc").ok());
  EXPECT_FALSE(Base64Decode("ab=c").ok());
  EXPECT_FALSE(Base64Decode("a===").ok());
  EXPECT_FALSE(Base64Decode("ab!d").ok());
  EXPECT_FALSE(Base64Decode("YQ==YQ==").ok());
}

TEST(EtcdClientTest, PrefixEnd) {
  EXPECT_EQ(EtcdClient::PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdClient::PrefixEnd(std::string("a\xff", 2)), "b");
}

TEST(EtcdClientTest, RejectsBadEndpoints) {
  EXPECT_FALSE(HttpEtcdClient::Create({"", 100ms}).ok());
  EXPECT_FALSE(HttpEtcdClient::Create({"127.0.0.1", 100ms}).ok());
  EXPECT_FALSE(HttpEtcdClient::Create({"127.0.0.1:99999", 100ms}).ok());
  EXPECT_TRUE(HttpEtcdClient::Create({"http://127.0.0.1:2379/,127.0.0.2:2379", 100ms}).ok());
}

TEST(EtcdClientTest, UnreachableIsUnavailable) {
  auto client = HttpEtcdClient::Create({"127.0.0.1:1", 500ms});
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Range("x", "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

class RealEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdTestServer::Available()) GTEST_SKIP() << "etcd binary not installed";
    ASSERT_TRUE(server_.Start().ok());
    auto c = HttpEtcdClient::Create({server_.endpoint(), 2000ms});
    ASSERT_TRUE(c.ok());
    client_ = std::move(c).value();
  }
  EtcdTestServer server_;
  std::unique_ptr<HttpEtcdClient> client_;
};

TEST_F(RealEtcdTest, PutRangeDelete) {
  ASSERT_TRUE(client_->Put("/t/a", "1").ok());
  ASSERT_TRUE(client_->Put("/t/b", std::string("\0\xff", 2)).ok());
  ASSERT_TRUE(client_->Put("/u/c", "3").ok());
  auto r = client_->RangePrefix("/t/");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0].key, "/t/a");
  EXPECT_EQ(r->kvs[1].value, std::string("\0\xff", 2));
  EXPECT_GT(r->revision, 0);
  auto single = client_->Range("/u/c", "");
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(single->kvs.size(), 1u);
  auto deleted = client_->DeleteRange("/t/", EtcdClient::PrefixEnd("/t/"));
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 2);
  EXPECT_TRUE(client_->RangePrefix("/t/")->kvs.empty());
}

TEST_F(RealEtcdTest, TxnPutIfAbsent) {
  auto first = client_->PutIfAbsent("/k", "v1");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  auto second = client_->PutIfAbsent("/k", "v2");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(client_->Range("/k", "")->kvs[0].value, "v1");
  // Compare on value; the failure branch deletes.
  TxnCompare c{"/k", TxnCompare::Target::kValue, TxnCompare::Result::kEqual, 0, "nope"};
  auto r = client_->Txn({c}, {}, {TxnOp{TxnOp::Kind::kDelete, "/k", "", 0, ""}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->succeeded);
  EXPECT_TRUE(client_->Range("/k", "")->kvs.empty());
}

TEST_F(RealEtcdTest, LeaseKeepAliveRevokeAndExpiry) {
  auto lease = client_->LeaseGrant(2);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("/l/a", "x", *lease).ok());
  EXPECT_EQ(client_->Range("/l/a", "")->kvs[0].lease, *lease);
  // Kept alive past its TTL, the key stays.
  for (int i = 0; i < 6; ++i) {
    auto ttl = client_->LeaseKeepAlive(*lease);
    ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
    EXPECT_GT(*ttl, 0);
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_EQ(client_->Range("/l/a", "")->kvs.size(), 1u);
  // Not kept alive, it expires.
  EXPECT_TRUE(WaitFor([&] { return client_->Range("/l/a", "")->kvs.empty(); }, 8000ms));
  auto gone = client_->LeaseKeepAlive(*lease);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  // Revoke deletes at once.
  auto lease2 = client_->LeaseGrant(30);
  ASSERT_TRUE(lease2.ok());
  ASSERT_TRUE(client_->Put("/l/b", "x", *lease2).ok());
  ASSERT_TRUE(client_->LeaseRevoke(*lease2).ok());
  EXPECT_TRUE(client_->Range("/l/b", "")->kvs.empty());
  EXPECT_EQ(client_->LeaseRevoke(*lease2).code(), StatusCode::kNotFound);
}

TEST_F(RealEtcdTest, WatchSeesPutsAndDeletes) {
  std::mutex mu;
  std::vector<WatchEvent> seen;
  WatchCallbacks cb;
  cb.on_events = [&](const std::vector<WatchEvent>& events, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(seen.end(), events.begin(), events.end());
  };
  auto watch = client_->Watch("/w/", EtcdClient::PrefixEnd("/w/"), 0, cb);
  ASSERT_TRUE(watch.ok());
  std::this_thread::sleep_for(200ms);  // the watch is created asynchronously
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  ASSERT_TRUE(client_->Put("/x/ignored", "1").ok());
  ASSERT_TRUE(client_->DeleteRange("/w/a", "").ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return seen.size() >= 2;
      },
      5000ms));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[0].kv.key, "/w/a");
  EXPECT_EQ(seen[0].kv.value, "1");
  EXPECT_EQ(seen[1].type, WatchEvent::Type::kDelete);
}

TEST_F(RealEtcdTest, PrefixWatcherHealsAcrossEtcdRestart) {
  std::atomic<int> changes{0};
  PrefixWatcher watcher(client_.get(), "/m/", 500ms,
                        [&](const PrefixWatcher::Snapshot&) { ++changes; });
  ASSERT_TRUE(client_->Put("/m/a", "1").ok());
  watcher.Start();
  ASSERT_TRUE(
      WaitFor([&] { return watcher.snapshot().count("/m/a") == 1 && watcher.healthy(); }, 5000ms));
  ASSERT_TRUE(client_->Put("/m/b", "2").ok());
  ASSERT_TRUE(WaitFor([&] { return watcher.snapshot().count("/m/b") == 1; }, 5000ms));

  server_.Stop(/*kill=*/true);
  EXPECT_EQ(client_->Put("/m/c", "3").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(WaitFor([&] { return !watcher.healthy(); }, 5000ms));
  EXPECT_EQ(watcher.snapshot().size(), 2u);  // the last view is kept while etcd is down

  ASSERT_TRUE(server_.Start().ok());
  ASSERT_TRUE(client_->Put("/m/c", "3").ok());
  ASSERT_TRUE(client_->DeleteRange("/m/a", "").ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = watcher.snapshot();
        return s.count("/m/c") == 1 && s.count("/m/a") == 0 && watcher.healthy();
      },
      8000ms));
  EXPECT_GE(changes.load(), 3);
  watcher.Stop();
}

TEST_F(RealEtcdTest, FaultyClientMakesWatcherUnhealthyThenHeals) {
  FaultyEtcdClient faulty(client_.get());
  PrefixWatcher watcher(&faulty, "/f/", 300ms, nullptr);
  faulty.set_unavailable(true);
  watcher.Start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(watcher.healthy());
  ASSERT_TRUE(client_->Put("/f/a", "1").ok());
  faulty.set_unavailable(false);
  EXPECT_TRUE(WaitFor([&] { return watcher.healthy() && watcher.snapshot().size() == 1; }, 5000ms));
  faulty.FailNext(1);
  EXPECT_FALSE(faulty.Put("/f/b", "1").ok());
  EXPECT_TRUE(faulty.Put("/f/b", "1").ok());
}

}  // namespace
}  // namespace tandem::etcd
