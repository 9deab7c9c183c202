// In-process tests of two pool workers with a real etcd (skipped without the etcd binary):
// local put/get, remote get through the other worker, async calls, batches larger
// than one request.
#include "pool/pool_worker.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "etcd/etcd_test_server.h"
#include "pool/pool_client.h"

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

class PoolWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!etcd::EtcdTestServer::Available()) GTEST_SKIP() << "etcd not installed";
    ASSERT_TRUE(etcd_.Start().ok());
  }
  std::unique_ptr<PoolWorker> StartWorker(const char* host, uint64_t mb = 64) {
    WorkerConfig c;
    c.worker_address = std::string(host) + ":" + std::to_string(FreePort(host));
    c.etcd_address = etcd_.endpoint();
    c.shared_memory_mb = mb;
    c.node_timeout_s = 3;
    c.node_dead_timeout_s = 6;
    c.metrics_port = 0;
    auto w = std::make_unique<PoolWorker>(c);
    Status s = w->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    addresses_.push_back(c.worker_address);
    return w;
  }
  etcd::EtcdTestServer etcd_;
  std::vector<std::string> addresses_;
};

std::vector<uint8_t> Value(size_t i, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t j = 0; j < size; ++j) v[j] = static_cast<uint8_t>(i * 31 + j);
  return v;
}

TEST_F(PoolWorkerTest, PutGetLocalAndRemote) {
  auto w1 = StartWorker("127.0.0.1");
  auto w2 = StartWorker("127.0.0.2");
  PoolClientOptions o1, o2;
  o1.worker_address = addresses_[0];
  o1.max_keys_per_request = 7;  // force chunking
  o2.worker_address = addresses_[1];
  auto c1 = PoolClient::Connect(o1);
  auto c2 = PoolClient::Connect(o2);
  ASSERT_TRUE(c1.ok() && c2.ok());

  const size_t n = 30, size = 100000;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> values;
  std::vector<std::span<const uint8_t>> spans;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back("fp@tp0@" + std::to_string(i));
    values.push_back(Value(i, size));
  }
  for (auto& v : values) spans.emplace_back(v);
  auto put = (*c1)->PutAsync(keys, spans).get();
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  for (auto o : *put) EXPECT_EQ(o, PutOutcome::kStored);

  auto local = (*c1)->Get(keys);
  ASSERT_TRUE(local.ok());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE((*local)->found(i));
    EXPECT_FALSE((*local)->remote(i));
    EXPECT_TRUE(std::equal(values[i].begin(), values[i].end(), (*local)->data(i).begin()));
  }
  (*local)->Release();

  // Through the other worker (after the write-behind directory update).
  size_t prefix = 0;
  for (int t = 0; t < 100 && prefix < n; ++t, std::this_thread::sleep_for(50ms)) {
    prefix = (*c2)->ExistPrefix(keys).value();
  }
  ASSERT_EQ(prefix, n);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(size));
  std::vector<std::span<uint8_t>> bufs;
  for (auto& b : out) bufs.emplace_back(b);
  auto got = (*c2)->GetIntoAsync(keys, bufs).get();
  ASSERT_TRUE(got.ok());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ((*got)[i], static_cast<int64_t>(size));
    EXPECT_EQ(out[i], values[i]);
  }
  auto missing = (*c2)->GetInto({"nope"}, {bufs[0]});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ((*missing)[0], -1);
  auto exist = (*c2)->ExistAsync({keys[0], "nope"}).get();
  ASSERT_TRUE(exist.ok());
  EXPECT_EQ(*exist, (std::vector<bool>{true, false}));
  w2->Stop();
  w1->Stop();
}

TEST(PoolClientTest, NoWorkerIsUnavailableNotAHang) {
  PoolClientOptions o;
  o.worker_address = "127.0.0.1:1";
  auto c = PoolClient::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  unsetenv("DS_WORKER_ADDR");
  EXPECT_EQ(PoolClient::Connect({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::pool
