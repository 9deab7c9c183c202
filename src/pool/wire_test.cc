#include "pool/wire.h"

#include <gtest/gtest.h>

namespace tandem::pool {
namespace {

TEST(WireTest, HeaderRoundTripAndChecks) {
  uint8_t buf[kHeaderBytes];
  EncodeHeader({MsgType::kGet, 5, 1234, 99}, buf);
  FrameHeader h;
  ASSERT_TRUE(DecodeHeader(buf, &h).ok());
  EXPECT_EQ(h.type, MsgType::kGet);
  EXPECT_EQ(h.status, 5);
  EXPECT_EQ(h.body_len, 1234u);
  EXPECT_EQ(h.request_id, 99u);

  uint8_t bad[kHeaderBytes];
  std::copy(buf, buf + kHeaderBytes, bad);
  bad[0] ^= 1;
  EXPECT_EQ(DecodeHeader(bad, &h).code(), StatusCode::kInvalidArgument);  // magic
  std::copy(buf, buf + kHeaderBytes, bad);
  bad[4] = 2;
  EXPECT_EQ(DecodeHeader(bad, &h).code(), StatusCode::kInvalidArgument);  // version
  std::copy(buf, buf + kHeaderBytes, bad);
  bad[6] = 200;
  EXPECT_EQ(DecodeHeader(bad, &h).code(), StatusCode::kInvalidArgument);  // type
  std::copy(buf, buf + kHeaderBytes, bad);
  bad[15] = 0xff;
  EXPECT_EQ(DecodeHeader(bad, &h).code(), StatusCode::kInvalidArgument);  // length
}

TEST(WireTest, BodyReaderIsBoundsChecked) {
  BodyWriter w;
  w.Keys({"a", "bc"});
  w.U64(7);
  BodyReader r(w.data());
  std::vector<std::string> keys;
  ASSERT_TRUE(r.Keys(&keys).ok());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "bc"}));
  uint64_t v = 0;
  ASSERT_TRUE(r.U64(&v).ok());
  EXPECT_EQ(v, 7u);
  EXPECT_TRUE(r.Finish().ok());
  EXPECT_FALSE(r.U64(&v).ok());

  // Every truncation of a valid body fails cleanly.
  for (size_t n = 0; n < w.data().size() - 8; ++n) {
    BodyReader t(std::string_view(w.data()).substr(0, n));
    std::vector<std::string> k;
    EXPECT_FALSE(t.Keys(&k).ok() && t.Finish().ok()) << n;
  }
  // Oversized counts and lengths are refused before any allocation.
  BodyWriter huge;
  huge.U32(0xffffffff);
  BodyReader hr(huge.data());
  EXPECT_FALSE(hr.Keys(&keys).ok());
  BodyWriter long_key;
  long_key.U32(1);
  long_key.U32(1u << 30);
  BodyReader lr(long_key.data());
  EXPECT_FALSE(lr.Keys(&keys).ok());
  BodyWriter empty_key;
  empty_key.Keys({""});
  BodyReader er(empty_key.data());
  EXPECT_FALSE(er.Keys(&keys).ok());
}

}  // namespace
}  // namespace tandem::pool
