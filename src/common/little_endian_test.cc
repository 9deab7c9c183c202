#include "common/little_endian.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(LittleEndian, LeastSignificantByteFirst) {
  uint8_t b[8] = {};
  little_endian::Store<uint16_t>(b, 0x0102);
  EXPECT_EQ(b[0], 0x02);
  EXPECT_EQ(b[1], 0x01);
  little_endian::Store<uint32_t>(b, 0x4C505454);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b), 4), "TTPL");
  little_endian::Store<uint64_t>(b, 0x0807060504030201);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], i + 1);
}

TEST(LittleEndian, LoadInvertsStoreAndAppendMatchesStore) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0xFFFF'FFFF'FFFF'FFFF}, uint64_t{0x8000'0000'0000'00A5}}) {
    uint8_t b[8];
    little_endian::Store<uint64_t>(b, v);
    EXPECT_EQ(little_endian::Load<uint64_t>(b), v);
    std::string s;
    little_endian::Append<uint64_t>(&s, v);
    EXPECT_EQ(s, std::string(reinterpret_cast<char*>(b), 8));
    little_endian::Store<uint16_t>(b, static_cast<uint16_t>(v));
    EXPECT_EQ(little_endian::Load<uint16_t>(b), static_cast<uint16_t>(v));
  }
  std::string s;
  little_endian::Append<uint32_t>(&s, 0xAABBCCDD);
  EXPECT_EQ(s, "\xdd\xcc\xbb\xaa");
}

}  // namespace
}  // namespace tandem
