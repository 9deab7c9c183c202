// The transfer server and client end to end over real sockets in one process: a
// producer arena in a memfd, a consumer arena on the heap.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "transfer/lease_table.h"
#include "transfer/transfer_client.h"
#include "transfer/transfer_server.h"
#include "transfer/wire.h"

namespace tandem::transfer {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kK = 3000;  // odd sizes on purpose
constexpr uint64_t kV = 2000;
constexpr int64_t kBlocks = 64;

struct SharedArena {
  SharedArena() {
    fd = memfd_create("test-arena", MFD_CLOEXEC);
    size = (kK + kV) * kBlocks;
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
    base = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    std::mt19937 rng(7);
    for (uint64_t i = 0; i < size; ++i) base[i] = static_cast<uint8_t>(rng());
  }
  ~SharedArena() {
    munmap(base, size);
    close(fd);
  }
  KvMemory memory() const {
    KvMemory m;
    m.keys = base;
    m.values = base + kK * kBlocks;
    m.k_block_bytes = kK;
    m.v_block_bytes = kV;
    m.num_blocks = kBlocks;
    m.fd = fd;
    m.map_size = size;
    m.keys_offset = 0;
    m.values_offset = kK * kBlocks;
    m.arena_id = 99;
    return m;
  }
  int fd;
  uint64_t size;
  uint8_t* base;
};

struct HeapArena {
  HeapArena() : keys(kK * kBlocks, 0), values(kV * kBlocks, 0) {}
  KvMemory memory() {
    KvMemory m;
    m.keys = keys.data();
    m.values = values.data();
    m.k_block_bytes = kK;
    m.v_block_bytes = kV;
    m.num_blocks = kBlocks;
    return m;
  }
  std::vector<uint8_t> keys;
  std::vector<uint8_t> values;
};

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TransferServerOptions o;
    o.bind_host = "127.0.0.1";
    o.port = 0;
    o.socket.io_timeout = milliseconds(2000);
    server_ = std::make_unique<TransferServer>(o, producer_.memory(), &leases_, "model-A");
    ASSERT_TRUE(server_->Start().ok());
  }

  PullSpec Spec(const std::string& id, std::vector<int32_t> remote, std::vector<int32_t> local) {
    return PullSpec{"127.0.0.1", server_->port(), id, std::move(remote), std::move(local)};
  }

  void ExpectCopied(const PullSpec& spec) {
    KvMemory p = producer_.memory();
    KvMemory c = consumer_.memory();
    for (size_t i = 0; i < spec.remote_block_ids.size(); ++i) {
      ASSERT_EQ(std::memcmp(p.BlockK(spec.remote_block_ids[i]), c.BlockK(spec.local_block_ids[i]), kK), 0) << i;
      ASSERT_EQ(std::memcmp(p.BlockV(spec.remote_block_ids[i]), c.BlockV(spec.local_block_ids[i]), kV), 0) << i;
    }
  }

  SharedArena producer_;
  HeapArena consumer_;
  LeaseTable leases_{milliseconds(5000), milliseconds(60000), nullptr};
  std::unique_ptr<TransferServer> server_;
  SocketTransport sockets_;
};

std::vector<int32_t> Range(int32_t from, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

TEST_F(TransferTest, TcpPullManyFramesThenDoneFreesTheLease) {
  std::vector<int32_t> remote = Range(10, 37);  // 37 blocks: three BLOCKS frames
  std::reverse(remote.begin(), remote.end());
  ASSERT_TRUE(leases_.Keep("req-1", remote).ok());
  TransferClient client(&sockets_, consumer_.memory(), "model-A", /*enable_shm=*/false);
  PullSpec spec = Spec("req-1", remote, Range(0, 37));
  StatusOr<PullResult> r = client.Pull(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->used_shm);
  EXPECT_EQ(r->bytes, 37 * (kK + kV));
  ExpectCopied(spec);
  EXPECT_EQ(leases_.TakeFreeable(), std::vector<std::string>{"req-1"});
  EXPECT_EQ(server_->stats().blocks_sent.load(), 37u);
}

TEST_F(TransferTest, SameHostPullUsesTheSharedArena) {
  ASSERT_TRUE(leases_.Keep("req-2", Range(0, 20)).ok());
  TransferClient client(&sockets_, consumer_.memory(), "model-A", /*enable_shm=*/true);
  PullSpec spec = Spec("req-2", Range(3, 17), Range(40, 17));
  StatusOr<PullResult> r = client.Pull(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->used_shm);
  ExpectCopied(spec);
  EXPECT_EQ(leases_.TakeFreeable(), std::vector<std::string>{"req-2"});
  // A second pull reuses the cached mapping.
  ASSERT_TRUE(leases_.Keep("req-3", Range(0, 2)).ok());
  r = client.Pull(Spec("req-3", {1}, {5}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(server_->stats().shm_pulls.load(), 2u);
}

TEST_F(TransferTest, RefusalsNameTheProblem) {
  ASSERT_TRUE(leases_.Keep("req-4", Range(0, 4)).ok());
  TransferClient client(&sockets_, consumer_.memory(), "model-A", false);
  EXPECT_EQ(client.Pull(Spec("nope", {0}, {0})).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.Pull(Spec("req-4", {0, 9}, {0, 1})).status().code(), StatusCode::kPermissionDenied);
  TransferClient other_model(&sockets_, consumer_.memory(), "model-B", false);
  Status s = other_model.Pull(Spec("req-4", {0}, {0})).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("model mismatch"), std::string::npos) << s.message();
  KvMemory small = consumer_.memory();
  small.k_block_bytes = kK - 1;
  TransferClient other_geometry(&sockets_, small, "model-A", false);
  EXPECT_EQ(other_geometry.Pull(Spec("req-4", {0}, {0})).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client.Pull(Spec("req-4", {0}, {kBlocks})).status().code(), StatusCode::kInvalidArgument);
  // Nothing above consumed the lease.
  EXPECT_TRUE(client.Pull(Spec("req-4", Range(0, 4), Range(0, 4))).ok());
}

TEST_F(TransferTest, BrokenStreamFailsCleanlyAndTheLeaseSurvivesForARetry) {
  ASSERT_TRUE(leases_.Keep("req-5", Range(0, 40)).ok());
  FaultPlan plan;
  plan.fail_after_recv_bytes = 100000;  // mid-way through the second frame
  FaultInjectingTransport faulty(&sockets_, plan);
  TransferClient client(&faulty, consumer_.memory(), "model-A", false);
  StatusOr<PullResult> r = client.Pull(Spec("req-5", Range(0, 40), Range(0, 40)));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // The lease is still live: a retry gets every block.
  EXPECT_TRUE(leases_.TakeFreeable().empty());
  TransferClient good(&sockets_, consumer_.memory(), "model-A", false);
  PullSpec spec = Spec("req-5", Range(0, 40), Range(0, 40));
  StatusOr<PullResult> retry = good.Pull(spec);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  ExpectCopied(spec);

  FaultPlan corrupt;
  corrupt.corrupt_recv_byte_at = 2;  // the magic of the first frame
  FaultInjectingTransport corrupting(&sockets_, corrupt);
  ASSERT_TRUE(leases_.Keep("req-6", Range(0, 2)).ok());
  TransferClient bad(&corrupting, consumer_.memory(), "model-A", false);
  EXPECT_EQ(bad.Pull(Spec("req-6", {0}, {0})).status().code(), StatusCode::kDataLoss);

  FaultPlan refuse;
  refuse.fail_connect = true;
  FaultInjectingTransport refusing(&sockets_, refuse);
  TransferClient unreachable(&refusing, consumer_.memory(), "model-A", false);
  EXPECT_EQ(unreachable.Pull(Spec("req-6", {0}, {0})).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refusing.connects(), 1);
}

TEST_F(TransferTest, UnreachableProducerIsUnavailable) {
  TransferClient client(&sockets_, consumer_.memory(), "model-A", true);
  PullSpec spec{"127.0.0.1", 1, "x", {0}, {0}};  // nothing listens on port 1
  EXPECT_EQ(client.Pull(spec).status().code(), StatusCode::kUnavailable);
}

TEST_F(TransferTest, GarbageFromAPeerIsRefusedAndTheServerKeepsServing) {
  for (const std::string& junk : {std::string("GET / HTTP/1.1\r\n\r\n"), std::string(16, '\0'),
                                  std::string("TDKV\x01\x00\x01\x00\xff\xff\xff\xff\x00\x00\x00\x00", 16)}) {
    StatusOr<std::unique_ptr<Connection>> c = sockets_.Connect({"127.0.0.1", server_->port(), false});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Send(junk.data(), junk.size()).ok());
    uint8_t header[kHeaderBytes];
    Status s = (*c)->Recv(header, kHeaderBytes);
    if (s.ok()) {
      StatusOr<FrameHeader> h = DecodeHeader(header);
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(h->type, FrameType::kError);
    }
  }
  ASSERT_TRUE(leases_.Keep("req-7", Range(0, 3)).ok());
  TransferClient client(&sockets_, consumer_.memory(), "model-A", false);
  EXPECT_TRUE(client.Pull(Spec("req-7", Range(0, 3), Range(0, 3))).ok());
}

TEST_F(TransferTest, AuthTokenIsRequiredWhenSet) {
  TransferServerOptions o;
  o.bind_host = "127.0.0.1";
  o.auth_token = "s3cret";
  TransferServer secured(o, producer_.memory(), &leases_, "model-A");
  ASSERT_TRUE(secured.Start().ok());
  ASSERT_TRUE(leases_.Keep("req-9", Range(0, 2)).ok());
  for (bool shm : {false, true}) {
    PullSpec spec{"127.0.0.1", secured.port(), "req-9", {0, 1}, {0, 1}};
    TransferClient none(&sockets_, consumer_.memory(), "model-A", shm);
    EXPECT_EQ(none.Pull(spec).status().code(), StatusCode::kUnauthenticated) << shm;
    TransferClient wrong(&sockets_, consumer_.memory(), "model-A", shm, "s3cre7");
    EXPECT_EQ(wrong.Pull(spec).status().code(), StatusCode::kUnauthenticated) << shm;
  }
  TransferClient right(&sockets_, consumer_.memory(), "model-A", true, "s3cret");
  StatusOr<PullResult> r = right.Pull({"127.0.0.1", secured.port(), "req-9", {0, 1}, {0, 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->used_shm);
  secured.Stop();
}

TEST_F(TransferTest, ReleaseWithoutPullAndPromptStop) {
  ASSERT_TRUE(leases_.Keep("req-8", Range(0, 3)).ok());
  TransferClient client(&sockets_, consumer_.memory(), "model-A", false);
  ASSERT_TRUE(client.Release("127.0.0.1", server_->port(), "req-8").ok());
  EXPECT_EQ(leases_.TakeFreeable(), std::vector<std::string>{"req-8"});
  // An idle connection does not hold up Stop().
  StatusOr<std::unique_ptr<Connection>> idle = sockets_.Connect({"127.0.0.1", server_->port(), false});
  ASSERT_TRUE(idle.ok());
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace tandem::transfer
