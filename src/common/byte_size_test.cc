#include "common/byte_size.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(ByteSize, UnitsAndErrors) {
  EXPECT_EQ(*ParseByteSize("4GiB"), int64_t{4} << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1.5 KiB"), 1536);
  EXPECT_EQ(*ParseByteSize("2G"), 2000000000);
  EXPECT_EQ(*ParseByteSize("32mb"), 32000000);
  EXPECT_EQ(*ParseByteSize("1000"), 1000);
  for (const char* bad : {"", "GiB", "4XB", "-1", "4GiBs", "0", "1e30"})
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
}

}  // namespace
}  // namespace tandem
