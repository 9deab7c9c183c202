#include "common/msgpack_writer.h"

#include <bit>
#include <limits>

#include "common/logging.h"

namespace tandem {

void MsgpackWriter::BigEndian(uint64_t value, int num_bytes) {
  for (int shift = (num_bytes - 1) * 8; shift >= 0; shift -= 8) {
    Byte(static_cast<uint8_t>(value >> shift));
  }
}

void MsgpackWriter::Nil() { Byte(0xc0); }

void MsgpackWriter::Bool(bool value) { Byte(value ? 0xc3 : 0xc2); }

void MsgpackWriter::Uint(uint64_t value) {
  if (value <= 0x7f) {
    Byte(static_cast<uint8_t>(value));  // positive fixint
  } else if (value <= 0xff) {
    Byte(0xcc);
    BigEndian(value, 1);
  } else if (value <= 0xffff) {
    Byte(0xcd);
    BigEndian(value, 2);
  } else if (value <= 0xffffffffu) {
    Byte(0xce);
    BigEndian(value, 4);
  } else {
    Byte(0xcf);
    BigEndian(value, 8);
  }
}

void MsgpackWriter::Int(int64_t value) {
  // The spec lets an encoder pick any form that holds the value; msgpack-python and msgspec
  // use the unsigned family for every non-negative value, and so do we.
  if (value >= 0) {
    Uint(static_cast<uint64_t>(value));
    return;
  }
  const uint64_t bits = static_cast<uint64_t>(value);  // two's complement
  if (value >= -32) {
    Byte(static_cast<uint8_t>(bits));  // negative fixint 0xe0..0xff
  } else if (value >= std::numeric_limits<int8_t>::min()) {
    Byte(0xd0);
    BigEndian(bits, 1);
  } else if (value >= std::numeric_limits<int16_t>::min()) {
    Byte(0xd1);
    BigEndian(bits, 2);
  } else if (value >= std::numeric_limits<int32_t>::min()) {
    Byte(0xd2);
    BigEndian(bits, 4);
  } else {
    Byte(0xd3);
    BigEndian(bits, 8);
  }
}

void MsgpackWriter::Double(double value) {
  Byte(0xcb);
  BigEndian(std::bit_cast<uint64_t>(value), 8);
}

void MsgpackWriter::LengthHeader(size_t n, uint8_t fix_base, size_t fix_limit, uint8_t type8,
                                 uint8_t type16, uint8_t type32) {
  TANDEM_CHECK(n <= 0xffffffffu) << "msgpack length " << n << " exceeds 2^32 - 1";
  if (fix_base != 0 && n < fix_limit) {
    Byte(static_cast<uint8_t>(fix_base | n));
  } else if (type8 != 0 && n <= 0xff) {
    Byte(type8);
    BigEndian(n, 1);
  } else if (n <= 0xffff) {
    Byte(type16);
    BigEndian(n, 2);
  } else {
    Byte(type32);
    BigEndian(n, 4);
  }
}

void MsgpackWriter::Str(std::string_view utf8) {
  LengthHeader(utf8.size(), 0xa0, 32, 0xd9, 0xda, 0xdb);
  out_.append(utf8);
}

void MsgpackWriter::Bin(std::span<const uint8_t> bytes) {
  LengthHeader(bytes.size(), 0, 0, 0xc4, 0xc5, 0xc6);
  out_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void MsgpackWriter::ArrayHeader(size_t num_elements) {
  LengthHeader(num_elements, 0x90, 16, 0, 0xdc, 0xdd);
}

void MsgpackWriter::MapHeader(size_t num_pairs) {
  LengthHeader(num_pairs, 0x80, 16, 0, 0xde, 0xdf);
}

std::string MsgpackWriter::Release() {
  std::string out = std::move(out_);
  out_.clear();
  return out;
}

}  // namespace tandem
