// In-process tests of pool workers with a disk tier and a real etcd (skipped without the
// etcd binary): spill on eviction, promotion on get (local and for another worker),
// restart on the same spill directory, soft pins.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "etcd/etcd_test_server.h"
#include "pool/pool_client.h"
#include "pool/pool_worker.h"

namespace tandem::pool {
namespace {

using namespace std::chrono_literals;

uint16_t FreePort(const char* host) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, host, &a.sin_addr);
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::vector<uint8_t> Value(size_t i, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t j = 0; j < size; ++j) v[j] = static_cast<uint8_t>(i * 31 + j);
  return v;
}

class WorkerDiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd::EtcdTestServer::Available()) GTEST_SKIP() << "etcd not installed";
    ASSERT_TRUE(etcd_.Start().ok());
    char tmpl[] = "/tmp/worker_disk_tier_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  WorkerConfig Config(const char* host, const std::string& spill_dir) {
    WorkerConfig c;
    c.worker_address = std::string(host) + ":" + std::to_string(FreePort(host));
    c.etcd_address = etcd_.endpoint();
    c.shared_memory_mb = 2;  // 20 objects of 100 kB
    c.node_timeout_s = 3;
    c.node_dead_timeout_s = 6;
    c.metrics_port = 0;
    c.default_kv_lease_ttl_ms = 0;
    c.spill_directory = spill_dir;
    return c;
  }
  std::unique_ptr<PoolWorker> Start(const WorkerConfig& c) {
    auto w = std::make_unique<PoolWorker>(c);
    Status s = w->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return w;
  }
  std::unique_ptr<PoolClient> Client(const WorkerConfig& c) {
    PoolClientOptions o;
    o.worker_address = c.worker_address;
    auto client = PoolClient::Connect(o);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }
  size_t Files() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      n += e.path().extension() == ".kv";
    return n;
  }

  etcd::EtcdTestServer etcd_;
  std::string dir_;
};

constexpr size_t kObjects = 60, kSize = 100000;  // 6 MB through a 2 MiB arena

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (size_t i = 0; i < kObjects; ++i) keys.push_back("fp@tp0@" + std::to_string(i));
  return keys;
}

void PutAll(PoolClient& c) {
  auto keys = Keys();
  for (size_t i = 0; i < kObjects; ++i) {  // one by one: each put evicts the oldest
    auto v = Value(i, kSize);
    auto put = c.Put({keys[i]}, {std::span<const uint8_t>(v)});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    EXPECT_EQ((*put)[0], PutOutcome::kStored);
  }
}

// Gets every key, checking bytes; returns how many came from each source.
std::map<ObjectSource, size_t> GetAll(PoolClient& c) {
  std::map<ObjectSource, size_t> sources;
  auto keys = Keys();
  for (size_t i = 0; i < kObjects; ++i) {
    auto got = c.Get({keys[i]});
    EXPECT_TRUE(got.ok());
    if (!got.ok() || !(*got)->found(0)) continue;
    auto want = Value(i, kSize);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), (*got)->data(0).begin())) << keys[i];
    ++sources[(*got)->source(0)];
  }
  return sources;
}

TEST_F(WorkerDiskTierTest, EvictedObjectsSpillAndComeBackAcrossARestart) {
  WorkerConfig c1 = Config("127.0.0.1", dir_);
  auto w1 = Start(c1);
  auto client = Client(c1);
  ASSERT_NE(client, nullptr);
  PutAll(*client);
  // A key held only on disk exists: a second put of it is skipped, not written again.
  auto again = Value(0, kSize);
  auto put = client->Put({Keys()[0]}, {std::span<const uint8_t>(again)});
  ASSERT_TRUE(put.ok());
  EXPECT_EQ((*put)[0], PutOutcome::kExists);
  auto sources = GetAll(*client);
  EXPECT_EQ(sources[ObjectSource::kMemory] + sources[ObjectSource::kDisk], kObjects);
  EXPECT_GE(sources[ObjectSource::kDisk], kObjects / 2);  // most were evicted, none lost

  // Another worker fetches a spilled key: the holder promotes it to answer the FETCH.
  WorkerConfig c2 = Config("127.0.0.2", "");
  auto w2 = Start(c2);
  auto client2 = Client(c2);
  ASSERT_NE(client2, nullptr);
  auto keys = Keys();
  bool exists = false;
  for (int t = 0; t < 100 && !exists; ++t, std::this_thread::sleep_for(50ms))
    exists = client2->Exist({keys[0]}).value()[0];
  ASSERT_TRUE(exists);
  auto remote = client2->Get({keys[0]});
  ASSERT_TRUE(remote.ok());
  ASSERT_TRUE((*remote)->found(0));
  EXPECT_EQ((*remote)->source(0), ObjectSource::kRemote);
  (*remote)->Release();

  // A graceful stop writes what is queued; the restarted worker re-indexes the files.
  client.reset();
  w1->Stop();
  w1.reset();
  size_t files = Files();
  EXPECT_GE(files, kObjects / 2);
  auto w1b = Start(c1);
  client = Client(c1);
  ASSERT_NE(client, nullptr);
  sources = GetAll(*client);
  EXPECT_EQ(sources[ObjectSource::kDisk], files);  // the arena starts empty
  EXPECT_EQ(sources[ObjectSource::kMemory], 0u);
  w2->Stop();
  w1b->Stop();
}

TEST_F(WorkerDiskTierTest, SoftPinnedObjectsOutliveTheLru) {
  WorkerConfig c = Config("127.0.0.1", "");  // memory only: an evicted object is gone
  auto w = Start(c);
  auto client = Client(c);
  ASSERT_NE(client, nullptr);
  auto keys = Keys();
  auto v = Value(0, kSize);
  ASSERT_TRUE(client->Put({"hot"}, {std::span<const uint8_t>(v)}).ok());
  auto pinned = client->SoftPin({"hot", "absent"});
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(*pinned, (std::vector<bool>{true, false}));
  PutAll(*client);  // 6 MB more through the 2 MiB arena
  auto got = client->Get({"hot", keys[0]});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)->found(0));   // soft-pinned: kept although least recently used
  EXPECT_FALSE((*got)->found(1));  // evicted
  w->Stop();
}

}  // namespace
}  // namespace tandem::pool
