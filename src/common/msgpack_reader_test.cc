// The byte strings below were made by Python's msgpack 1.x (msgpack.packb(...,
// use_bin_type=True)); each test names the Python value.
#include "common/msgpack_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;

TEST(MsgpackReaderTest, EveryIntegerEncoding) {
  // [0, 127, -1, -32, -33, 128, 255, 256, 65535, 65536, 2**32, 2**63-1, -128, -129,
  //  -32768, -32769, -2**31-1, -2**63]
  const std::string bytes =
      "\xdc\x00\x12\x00\x7f\xff\xe0\xd0\xdf\xcc\x80\xcc\xff\xcd\x01\x00\xcd\xff\xff\xce\x00\x01"
      "\x00\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xcf\x7f\xff\xff\xff\xff\xff\xff\xff\xd0\x80"
      "\xd1\xff\x7f\xd1\x80\x00\xd2\xff\xff\x7f\xff\xd3\xff\xff\xff\xff\x7f\xff\xff\xff\xd3\x80"
      "\x00\x00\x00\x00\x00\x00\x00"s;
  const std::vector<int64_t> want = {0,    127,  -1,     -32,    -33,           128,
                                     255,  256,  65535,  65536,  1LL << 32,     INT64_MAX,
                                     -128, -129, -32768, -32769, -2147483649LL, INT64_MIN};
  MsgpackReader r(bytes);
  ASSERT_EQ(*r.ReadArrayHeader(), want.size());
  for (int64_t w : want) {
    StatusOr<int64_t> v = r.ReadInt();
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, w);
  }
  EXPECT_TRUE(r.AtEnd());
}

TEST(MsgpackReaderTest, KvEventBatch) {
  // [1733000000.5, [["BlockStored", [bytes(range(16)), bytes(range(16, 32))], None,
  //   [1..8], 4, None, "GPU"], ["BlockRemoved", [bytes(range(16))], "GPU"],
  //   ["AllBlocksCleared"]], None]
  const std::string bytes =
      "\x93\xcb\x41\xd9\xd2\xde\xd0\x20\x00\x00\x93\x97\xab\x42\x6c\x6f\x63\x6b\x53\x74\x6f\x72"
      "\x65\x64\x92\xc4\x10\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\xc4"
      "\x10\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\xc0\x98\x01\x02\x03"
      "\x04\x05\x06\x07\x08\x04\xc0\xa3\x47\x50\x55\x93\xac\x42\x6c\x6f\x63\x6b\x52\x65\x6d\x6f"
      "\x76\x65\x64\x91\xc4\x10\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
      "\xa3\x47\x50\x55\x91\xb0\x41\x6c\x6c\x42\x6c\x6f\x63\x6b\x73\x43\x6c\x65\x61\x72\x65\x64"
      "\xc0"s;
  MsgpackReader r(bytes);
  ASSERT_EQ(*r.ReadArrayHeader(), 3u);
  EXPECT_DOUBLE_EQ(*r.ReadFloat(), 1733000000.5);
  ASSERT_EQ(*r.ReadArrayHeader(), 3u);
  ASSERT_EQ(*r.ReadArrayHeader(), 7u);
  EXPECT_EQ(*r.ReadStr(), "BlockStored");
  ASSERT_EQ(*r.ReadArrayHeader(), 2u);
  std::string_view h0 = *r.ReadBin();
  ASSERT_EQ(h0.size(), 16u);
  EXPECT_EQ(static_cast<uint8_t>(h0[15]), 15);
  EXPECT_EQ(static_cast<uint8_t>((*r.ReadBin())[0]), 16);
  EXPECT_TRUE(r.NextIsNil());
  EXPECT_TRUE(r.ReadNil().ok());
  ASSERT_EQ(*r.ReadArrayHeader(), 8u);
  for (int i = 1; i <= 8; ++i) EXPECT_EQ(*r.ReadInt(), i);
  EXPECT_EQ(*r.ReadInt(), 4);
  EXPECT_TRUE(r.ReadNil().ok());
  EXPECT_EQ(*r.ReadStr(), "GPU");
  // The rest, skipped as whole values.
  EXPECT_TRUE(r.Skip().ok());  // BlockRemoved
  EXPECT_EQ(*r.PeekType(), MsgpackReader::Type::kArray);
  EXPECT_TRUE(r.Skip().ok());  // AllBlocksCleared
  EXPECT_TRUE(r.ReadNil().ok());
  EXPECT_TRUE(r.AtEnd());
}

TEST(MsgpackReaderTest, StrBinMapFloatBool) {
  // [True, False, None, "x"*40, b"y"*300, {"a": 1, "b": [1.5]}, 1.25]
  const std::string bytes = "\x97\xc3\xc2\xc0\xd9\x28"s + std::string(40, 'x') + "\xc5\x01\x2c"s +
                            std::string(300, 'y') +
                            "\x82\xa1\x61\x01\xa1\x62\x91\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00"
                            "\xcb\x3f\xf4\x00\x00\x00\x00\x00\x00"s;
  MsgpackReader r(bytes);
  ASSERT_EQ(*r.ReadArrayHeader(), 7u);
  EXPECT_TRUE(*r.ReadBool());
  EXPECT_FALSE(*r.ReadBool());
  EXPECT_TRUE(r.ReadNil().ok());
  EXPECT_EQ(*r.ReadStr(), std::string(40, 'x'));
  EXPECT_EQ(*r.ReadBin(), std::string(300, 'y'));
  ASSERT_EQ(*r.ReadMapHeader(), 2u);
  EXPECT_EQ(*r.ReadStr(), "a");
  EXPECT_EQ(*r.ReadInt(), 1);
  EXPECT_EQ(*r.ReadStr(), "b");
  ASSERT_EQ(*r.ReadArrayHeader(), 1u);
  EXPECT_DOUBLE_EQ(*r.ReadFloat(), 1.5);
  EXPECT_DOUBLE_EQ(*r.ReadFloat(), 1.25);
  EXPECT_TRUE(r.AtEnd());
}

TEST(MsgpackReaderTest, Float32AndIntegersAsFloats) {
  MsgpackReader f32("\xca\x3f\xc0\x00\x00"sv);  // msgpack.packb(1.5, use_single_float=True)
  EXPECT_DOUBLE_EQ(*f32.ReadFloat(), 1.5);
  MsgpackReader i("\x05"sv);
  EXPECT_DOUBLE_EQ(*i.ReadFloat(), 5.0);
}

TEST(MsgpackReaderTest, WrongTypeLeavesThePositionAlone) {
  MsgpackReader r("\xa3GPU"sv);
  EXPECT_FALSE(r.ReadInt().ok());
  EXPECT_FALSE(r.ReadBin().ok());
  EXPECT_FALSE(r.ReadArrayHeader().ok());
  EXPECT_EQ(r.offset(), 0u);
  EXPECT_EQ(*r.ReadStr(), "GPU");
}

TEST(MsgpackReaderTest, Uint64AboveInt64IsOutOfRange) {
  MsgpackReader r("\xcf\xff\xff\xff\xff\xff\xff\xff\xff"sv);  // 2**64-1
  EXPECT_EQ(r.ReadInt().status().code(), StatusCode::kOutOfRange);
}

TEST(MsgpackReaderTest, MalformedInputIsAnErrorNotACrash) {
  const std::vector<std::string> bad = {
      ""s,
      "\xc1"s,  // reserved
      "\xd9"s,  // str8 without its length
      "\xd9\x05"
      "abc"s,                   // str8 shorter than declared
      "\xc4\x10\x00\x01"s,      // bin8 shorter than declared
      "\xcb\x3f\xf8"s,          // truncated float64
      "\xcd\x01"s,              // truncated uint16
      "\xdd\xff\xff\xff\xff"s,  // array32 of 4G elements in 5 bytes
      "\xdf\x7f\xff\xff\xff"s,  // map32 likewise
      "\x92\x01"s,              // array of 2 with one element (Skip)
      "\xc7\x05\x01\x00"s,      // ext8 shorter than declared
  };
  for (const std::string& b : bad) {
    MsgpackReader r(b);
    EXPECT_FALSE(r.Skip().ok()) << "skip accepted " << b.size() << " bytes";
    EXPECT_EQ(r.offset(), 0u);
    MsgpackReader r2(b);
    EXPECT_FALSE(r2.ReadStr().ok());
  }
  // Every prefix of a valid batch fails cleanly when skipped.
  const std::string whole =
      "\x93\xcb\x41\xd9\xd2\xde\xd0\x20\x00\x00\x91\x91\xb0"s + "AllBlocksCleared" + "\xc0"s;
  ASSERT_TRUE(MsgpackReader(whole).Skip().ok());
  for (size_t n = 0; n < whole.size(); ++n) {
    MsgpackReader r(std::string_view(whole).substr(0, n));
    EXPECT_FALSE(r.Skip().ok()) << n;
  }
}

TEST(MsgpackReaderTest, DeepNestingIsSkippedWithoutRecursion) {
  std::string deep(100000, '\x91');
  deep += '\xc0';
  MsgpackReader r(deep);
  EXPECT_TRUE(r.Skip().ok());
  EXPECT_TRUE(r.AtEnd());
}

}  // namespace
}  // namespace tandem
