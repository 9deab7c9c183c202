// MsgpackReader: a bounds-checked pull decoder of MessagePack (the spec at
// github.com/msgpack/msgpack/blob/master/spec.md), for the KV events engines publish
// (vLLM's msgspec encoding: arrays, nil, bool, ints, floats, str, bin).
//
// The reader walks one buffer front to back. Each Read* call decodes the next value if
// it has the wanted type and advances past it; otherwise it returns an error and
// leaves the position unchanged. Containers are read as a header (the element count)
// followed by their elements, so a caller decodes nested data without building a tree.
// Every length is checked against the bytes left: malformed or truncated input gives
// InvalidArgument, never a read past the end. Ext values are skipped by Skip() only.
//
// The reader borrows the buffer: string and bin views point into it and stay valid
// while it lives.
//
// Thread safety: a value type; one reader is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace tandem {

class MsgpackReader {
 public:
  enum class Type { kNil, kBool, kInt, kFloat, kStr, kBin, kArray, kMap, kExt };

  explicit MsgpackReader(std::string_view bytes) : data_(bytes) {}

  bool AtEnd() const { return pos_ >= data_.size(); }
  size_t offset() const { return pos_; }

  // The type of the next value; InvalidArgument at the end or on the reserved byte 0xc1.
  StatusOr<Type> PeekType() const;
  // True when the next value is nil (false at the end).
  bool NextIsNil() const;

  Status ReadNil();
  StatusOr<bool> ReadBool();
  // Any integer encoding; OutOfRange for a uint64 above INT64_MAX.
  StatusOr<int64_t> ReadInt();
  // float32 / float64, or an integer (converted).
  StatusOr<double> ReadFloat();
  StatusOr<std::string_view> ReadStr();
  StatusOr<std::string_view> ReadBin();
  // Element count of an array (then read that many values) / pairs of a map.
  StatusOr<uint32_t> ReadArrayHeader();
  StatusOr<uint32_t> ReadMapHeader();

  // Skips the next value, containers included (iteratively: deep nesting cannot
  // overflow the stack).
  Status Skip();

 private:
  // Reads a big-endian unsigned integer of `n` bytes at `at`; false past the end.
  bool BigEndian(size_t at, int n, uint64_t* out) const;
  // Decodes the header at the position: its type, the bytes it occupies (`header`)
  // and, for str/bin/ext, the payload length; for array/map the element count.
  Status Header(Type* type, size_t* header, uint64_t* length) const;
  Status Error(const char* what) const;

  std::string_view data_;
  size_t pos_ = 0;
};

}  // namespace tandem
