#include "common/msgpack_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace tandem {
namespace {

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

std::string Encode(const std::function<void(MsgpackWriter&)>& write) {
  MsgpackWriter w;
  write(w);
  return Hex(w.data());
}

// Every expected string below is msgpack.packb(value, use_bin_type=True).hex() from
// msgpack-python 1.0 (the bytes a Python subscriber decodes).
TEST(MsgpackWriter, IntegersTakeTheShortestForm) {
  const std::vector<std::pair<int64_t, std::string>> cases = {
      {0, "00"},
      {1, "01"},
      {127, "7f"},
      {128, "cc80"},
      {255, "ccff"},
      {256, "cd0100"},
      {65535, "cdffff"},
      {65536, "ce00010000"},
      {4294967295, "ceffffffff"},
      {4294967296, "cf0000000100000000"},
      {std::numeric_limits<int64_t>::max(), "cf7fffffffffffffff"},
      {-1, "ff"},
      {-32, "e0"},
      {-33, "d0df"},
      {-128, "d080"},
      {-129, "d1ff7f"},
      {-32768, "d18000"},
      {-32769, "d2ffff7fff"},
      {-2147483648LL, "d280000000"},
      {-2147483649LL, "d3ffffffff7fffffff"},
      {std::numeric_limits<int64_t>::min(), "d38000000000000000"},
  };
  for (const auto& [value, hex] : cases) {
    EXPECT_EQ(Encode([v = value](MsgpackWriter& w) { w.Int(v); }), hex) << value;
  }
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Uint(std::numeric_limits<uint64_t>::max()); }),
            "cfffffffffffffffff");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Uint(200); }), "ccc8");
}

TEST(MsgpackWriter, NilBoolAndFloat64) {
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Nil(); }), "c0");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Bool(true); }), "c3");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Bool(false); }), "c2");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Double(0.0); }), "cb0000000000000000");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Double(1.5); }), "cb3ff8000000000000");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Double(-2.25); }), "cbc002000000000000");
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Double(1e300); }), "cb7e37e43c8800759c");
}

// The first 6 bytes (12 hex digits) are the header and the start of the payload.
TEST(MsgpackWriter, StrAndBinLengthBoundaries) {
  struct Case {
    size_t n;
    std::string str_hex;  // header and start of the payload (at most 6 bytes)
    size_t str_header;    // header bytes
    std::string bin_hex;
    size_t bin_header;
  };
  const std::vector<Case> cases = {
      {0, "a0", 1, "c400", 2},
      {31, "bf6161616161", 1, "c41f01010101", 2},
      {32, "d92061616161", 2, "c42001010101", 2},
      {255, "d9ff61616161", 2, "c4ff01010101", 2},
      {256, "da0100616161", 3, "c50100010101", 3},
      {65535, "daffff616161", 3, "c5ffff010101", 3},
      {65536, "db0001000061", 5, "c60001000001", 5},
  };
  for (const Case& c : cases) {
    MsgpackWriter s;
    s.Str(std::string(c.n, 'a'));
    EXPECT_EQ(Hex(s.data()).substr(0, 12), c.str_hex) << c.n;
    EXPECT_EQ(s.data().size(), c.str_header + c.n) << c.n;
    const std::vector<uint8_t> bytes(c.n, 1);
    MsgpackWriter b;
    b.Bin(bytes);
    EXPECT_EQ(Hex(b.data()).substr(0, 12), c.bin_hex) << c.n;
    EXPECT_EQ(b.data().size(), c.bin_header + c.n) << c.n;
  }
  EXPECT_EQ(Encode([](MsgpackWriter& w) { w.Str("h\xc3\xa9llo"); }), "a668c3a96c6c6f");
}

TEST(MsgpackWriter, ArrayAndMapHeaderBoundaries) {
  const std::vector<std::tuple<size_t, std::string, std::string>> cases = {
      {0, "90", "80"},
      {15, "9f", "8f"},
      {16, "dc0010", "de0010"},
      {65535, "dcffff", "deffff"},
      {65536, "dd00010000", "df00010000"},
  };
  for (const auto& [n, array_hex, map_hex] : cases) {
    EXPECT_EQ(Encode([n = n](MsgpackWriter& w) { w.ArrayHeader(n); }), array_hex) << n;
    EXPECT_EQ(Encode([n = n](MsgpackWriter& w) { w.MapHeader(n); }), map_hex) << n;
  }
}

TEST(MsgpackWriter, NestedValueMatchesPython) {
  // msgpack.packb([1.5, ["BlockRemoved", [b"\x00\x01"], "CPU"], None]).hex()
  MsgpackWriter w;
  w.ArrayHeader(3);
  w.Double(1.5);
  w.ArrayHeader(3);
  w.Str("BlockRemoved");
  w.ArrayHeader(1);
  const uint8_t hash[] = {0, 1};
  w.Bin(hash);
  w.Str("CPU");
  w.Nil();
  EXPECT_EQ(Hex(w.data()), "93cb3ff800000000000093ac426c6f636b52656d6f76656491c4020001a3435055c0");
  const std::string released = w.Release();
  EXPECT_EQ(released.size(), 34u);
  EXPECT_TRUE(w.data().empty());
}

}  // namespace
}  // namespace tandem
