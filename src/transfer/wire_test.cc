#include "transfer/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tandem::transfer {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(WireTest, HeaderRoundTripAndChecks) {
  uint8_t h[kHeaderBytes];
  EncodeHeader(FrameType::kPull, 1234, h);
  StatusOr<FrameHeader> d = DecodeHeader(h);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, FrameType::kPull);
  EXPECT_EQ(d->payload_bytes, 1234u);

  uint8_t bad[kHeaderBytes];
  std::memcpy(bad, h, kHeaderBytes);
  bad[0] ^= 1;
  EXPECT_EQ(DecodeHeader(bad).status().code(), StatusCode::kDataLoss);
  std::memcpy(bad, h, kHeaderBytes);
  bad[4] = 2;  // version 2
  EXPECT_EQ(DecodeHeader(bad).status().code(), StatusCode::kFailedPrecondition);
  std::memcpy(bad, h, kHeaderBytes);
  bad[6] = 99;  // type
  EXPECT_EQ(DecodeHeader(bad).status().code(), StatusCode::kDataLoss);
  EncodeHeader(FrameType::kPull, kMaxControlPayload + 1, bad);  // control frame too large
  EXPECT_EQ(DecodeHeader(bad).status().code(), StatusCode::kDataLoss);
  EncodeHeader(FrameType::kBlocks, kMaxControlPayload + 1, bad);  // fine for data
  EXPECT_TRUE(DecodeHeader(bad).ok());
  EncodeHeader(FrameType::kBlocks, kMaxDataPayload + 1, bad);
  EXPECT_FALSE(DecodeHeader(bad).ok());
}

TEST(WireTest, PullRoundTripAndEveryTruncationFails) {
  PullRequest p{"cmpl-abc", "fp123", 1000, 2000, {3, 1, 4, 1, 5}};
  const std::string enc = EncodePull(p);
  StatusOr<PullRequest> d = DecodePull(Bytes(enc));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->request_id, "cmpl-abc");
  EXPECT_EQ(d->model_fingerprint, "fp123");
  EXPECT_EQ(d->k_block_bytes, 1000u);
  EXPECT_EQ(d->v_block_bytes, 2000u);
  EXPECT_EQ(d->block_ids, p.block_ids);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodePull(Bytes(enc.substr(0, n))).ok()) << n;
  }
  EXPECT_FALSE(DecodePull(Bytes(enc + "x")).ok());
  std::string huge = enc;
  huge[huge.size() - 1] = static_cast<char>(0xFF);  // block id > INT32_MAX
  EXPECT_FALSE(DecodePull(Bytes(huge)).ok());
}

TEST(WireTest, BlocksPrefixValidation) {
  uint8_t p[kBlocksPrefixBytes];
  uint32_t first = 0;
  uint32_t count = 0;
  EncodeBlocksPrefix(2, 3, p);
  EXPECT_TRUE(DecodeBlocksPrefix(p, kBlocksPrefixBytes + 3 * 100, 5, 100, &first, &count).ok());
  EXPECT_EQ(first, 2u);
  EXPECT_EQ(count, 3u);
  EXPECT_FALSE(DecodeBlocksPrefix(p, kBlocksPrefixBytes + 3 * 100, 4, 100, &first, &count).ok());  // past the end
  EXPECT_FALSE(DecodeBlocksPrefix(p, kBlocksPrefixBytes + 2 * 100, 5, 100, &first, &count).ok());  // size
  EncodeBlocksPrefix(0, 0, p);
  EXPECT_FALSE(DecodeBlocksPrefix(p, kBlocksPrefixBytes, 5, 100, &first, &count).ok());
  EncodeBlocksPrefix(0xFFFFFFFF, 2, p);  // overflow of first + count
  EXPECT_FALSE(DecodeBlocksPrefix(p, kBlocksPrefixBytes + 200, 5, 100, &first, &count).ok());
}

TEST(WireTest, DoneErrorShmMap) {
  StatusOr<std::string> id = DecodeDone(Bytes(EncodeDone("req-1")));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "req-1");
  EXPECT_FALSE(DecodeDone(Bytes(EncodeDone("req-1") + "z")).ok());

  Status e = DecodeError(Bytes(EncodeError(NotFoundError("no lease"))));
  EXPECT_EQ(e.code(), StatusCode::kNotFound);
  EXPECT_NE(e.message().find("no lease"), std::string::npos);
  EXPECT_FALSE(DecodeError(Bytes(std::string("\x01\x00", 2))).ok());

  ShmMap m{1 << 20, 0, 1 << 19, 42};
  StatusOr<ShmMap> d = DecodeShmMap(Bytes(EncodeShmMap(m)));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->values_offset, m.values_offset);
  EXPECT_EQ(d->arena_id, 42u);
  m.values_offset = (1 << 20) + 1;
  EXPECT_FALSE(DecodeShmMap(Bytes(EncodeShmMap(m))).ok());
}

}  // namespace
}  // namespace tandem::transfer
