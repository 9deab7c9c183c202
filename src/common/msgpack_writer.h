// MsgpackWriter: appends MessagePack values to a byte string (https://msgpack.org, spec
// "msgpack/spec.md"). Encoder only; it writes exactly what Python's msgpack.packb and
// msgspec write for the same values, so other languages' decoders read it unchanged:
//   - integers take the shortest form: positive fixint (0..127), negative fixint (-32..-1),
//     then uint8/16/32/64 for non-negative values and int8/16/32/64 for negative ones;
//   - floats are always float64 (0xcb), as msgspec and msgpack-python encode Python floats;
//   - str and bin take fixstr/str8/str16/str32 and bin8/bin16/bin32 by length;
//   - arrays and maps are written as a header (fixarray/array16/array32, fixmap/map16/map32)
//     followed by the caller's elements (maps: key, value, key, value, ...).
// Multi-byte fields are big-endian, as the spec requires.
//
// The writer does not track nesting: a header promises `n` elements and the caller writes
// them. Lengths above 2^32 - 1 cannot be encoded and are a bug (TANDEM_CHECK aborts).
//
// Thread safety: none; one owner writes. The output is a plain std::string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tandem {

class MsgpackWriter {
 public:
  void Nil();
  void Bool(bool value);
  void Int(int64_t value);    // shortest signed/unsigned form for the value
  void Uint(uint64_t value);  // shortest unsigned form (values above INT64_MAX need this)
  void Double(double value);  // float64
  void Str(std::string_view utf8);
  void Bin(std::span<const uint8_t> bytes);
  void ArrayHeader(size_t num_elements);
  void MapHeader(size_t num_pairs);

  // The bytes written so far.
  const std::string& data() const { return out_; }
  // Moves the bytes out; the writer is empty afterwards.
  std::string Release();

 private:
  void Byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void BigEndian(uint64_t value, int num_bytes);
  // A length-prefixed header: `fix_base | n` when n < fix_limit (fix_base 0 = no fix form),
  // else the 8/16/32-bit form whose type byte is given (0 = that width does not exist).
  void LengthHeader(size_t n, uint8_t fix_base, size_t fix_limit, uint8_t type8, uint8_t type16,
                    uint8_t type32);

  std::string out_;
};

}  // namespace tandem
