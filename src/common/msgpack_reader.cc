#include "common/msgpack_reader.h"

#include <cstring>
#include <limits>
#include <string>

namespace tandem {

bool MsgpackReader::BigEndian(size_t at, int n, uint64_t* out) const {
  if (at > data_.size() || data_.size() - at < static_cast<size_t>(n)) return false;
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(data_[at + i]);
  *out = v;
  return true;
}

Status MsgpackReader::Error(const char* what) const {
  return InvalidArgumentError(std::string("msgpack: ") + what + " at byte " + std::to_string(pos_));
}

// For scalars `length` is 0 and `header` covers the whole value; for str/bin/ext the
// payload (ext: its type byte included) follows the header; for containers `length`
// is the element count (map: key/value pairs).
Status MsgpackReader::Header(Type* type, size_t* header, uint64_t* length) const {
  if (AtEnd()) return Error("unexpected end of input");
  const uint8_t b = static_cast<uint8_t>(data_[pos_]);
  *length = 0;
  *header = 1;
  auto sized = [&](Type t, int len_bytes, uint64_t extra) -> Status {
    *type = t;
    *header = 1 + len_bytes;
    if (!BigEndian(pos_ + 1, len_bytes, length)) return Error("truncated length");
    *length += extra;
    return Status::Ok();
  };
  if (b <= 0x7f || b >= 0xe0) {
    *type = Type::kInt;
  } else if (b <= 0x8f) {
    *type = Type::kMap;
    *length = b & 0x0f;
  } else if (b <= 0x9f) {
    *type = Type::kArray;
    *length = b & 0x0f;
  } else if (b <= 0xbf) {
    *type = Type::kStr;
    *length = b & 0x1f;
  } else {
    switch (b) {
      case 0xc0:
        *type = Type::kNil;
        break;
      case 0xc2:
      case 0xc3:
        *type = Type::kBool;
        break;
      case 0xc4:
        return sized(Type::kBin, 1, 0);
      case 0xc5:
        return sized(Type::kBin, 2, 0);
      case 0xc6:
        return sized(Type::kBin, 4, 0);
      case 0xc7:
        return sized(Type::kExt, 1, 1);
      case 0xc8:
        return sized(Type::kExt, 2, 1);
      case 0xc9:
        return sized(Type::kExt, 4, 1);
      case 0xca:
        *type = Type::kFloat;
        *header = 5;
        break;
      case 0xcb:
        *type = Type::kFloat;
        *header = 9;
        break;
      case 0xcc:
      case 0xd0:
        *type = Type::kInt;
        *header = 2;
        break;
      case 0xcd:
      case 0xd1:
        *type = Type::kInt;
        *header = 3;
        break;
      case 0xce:
      case 0xd2:
        *type = Type::kInt;
        *header = 5;
        break;
      case 0xcf:
      case 0xd3:
        *type = Type::kInt;
        *header = 9;
        break;
      case 0xd4:
        *type = Type::kExt;
        *header = 1;
        *length = 2;
        break;
      case 0xd5:
        *type = Type::kExt;
        *header = 1;
        *length = 3;
        break;
      case 0xd6:
        *type = Type::kExt;
        *header = 1;
        *length = 5;
        break;
      case 0xd7:
        *type = Type::kExt;
        *header = 1;
        *length = 9;
        break;
      case 0xd8:
        *type = Type::kExt;
        *header = 1;
        *length = 17;
        break;
      case 0xd9:
        return sized(Type::kStr, 1, 0);
      case 0xda:
        return sized(Type::kStr, 2, 0);
      case 0xdb:
        return sized(Type::kStr, 4, 0);
      case 0xdc:
        return sized(Type::kArray, 2, 0);
      case 0xdd:
        return sized(Type::kArray, 4, 0);
      case 0xde:
        return sized(Type::kMap, 2, 0);
      case 0xdf:
        return sized(Type::kMap, 4, 0);
      default:
        return Error("reserved type byte 0xc1");
    }
  }
  if (data_.size() - pos_ < *header) return Error("truncated value");
  return Status::Ok();
}

StatusOr<MsgpackReader::Type> MsgpackReader::PeekType() const {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  return type;
}

bool MsgpackReader::NextIsNil() const {
  return !AtEnd() && static_cast<uint8_t>(data_[pos_]) == 0xc0;
}

Status MsgpackReader::ReadNil() {
  if (!NextIsNil()) return Error("expected nil");
  ++pos_;
  return Status::Ok();
}

StatusOr<bool> MsgpackReader::ReadBool() {
  if (AtEnd()) return Error("unexpected end of input");
  const uint8_t b = static_cast<uint8_t>(data_[pos_]);
  if (b != 0xc2 && b != 0xc3) return Error("expected a bool");
  ++pos_;
  return b == 0xc3;
}

StatusOr<int64_t> MsgpackReader::ReadInt() {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  if (type != Type::kInt) return Error("expected an integer");
  const uint8_t b = static_cast<uint8_t>(data_[pos_]);
  int64_t value = 0;
  if (b <= 0x7f) {
    value = b;
  } else if (b >= 0xe0) {
    value = static_cast<int8_t>(b);
  } else {
    uint64_t raw = 0;
    BigEndian(pos_ + 1, static_cast<int>(header - 1), &raw);  // Header checked the size
    switch (b) {
      case 0xcc:
      case 0xcd:
      case 0xce:
        value = static_cast<int64_t>(raw);
        break;
      case 0xcf:
        if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return OutOfRangeError("msgpack: uint64 " + std::to_string(raw) + " exceeds int64");
        }
        value = static_cast<int64_t>(raw);
        break;
      case 0xd0:
        value = static_cast<int8_t>(raw);
        break;
      case 0xd1:
        value = static_cast<int16_t>(raw);
        break;
      case 0xd2:
        value = static_cast<int32_t>(raw);
        break;
      default:
        value = static_cast<int64_t>(raw);
        break;  // 0xd3: two's complement
    }
  }
  pos_ += header;
  return value;
}

StatusOr<double> MsgpackReader::ReadFloat() {
  if (AtEnd()) return Error("unexpected end of input");
  const uint8_t b = static_cast<uint8_t>(data_[pos_]);
  if (b != 0xca && b != 0xcb) {
    StatusOr<int64_t> i = ReadInt();
    if (!i.ok()) return Error("expected a number");
    return static_cast<double>(*i);
  }
  uint64_t raw = 0;
  if (!BigEndian(pos_ + 1, b == 0xca ? 4 : 8, &raw)) return Error("truncated float");
  double value;
  if (b == 0xca) {
    uint32_t bits = static_cast<uint32_t>(raw);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    value = f;
  } else {
    std::memcpy(&value, &raw, sizeof(value));
  }
  pos_ += b == 0xca ? 5 : 9;
  return value;
}

StatusOr<std::string_view> MsgpackReader::ReadStr() {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  if (type != Type::kStr) return Error("expected a string");
  if (data_.size() - pos_ - header < length) return Error("truncated string");
  std::string_view out = data_.substr(pos_ + header, length);
  pos_ += header + length;
  return out;
}

StatusOr<std::string_view> MsgpackReader::ReadBin() {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  if (type != Type::kBin) return Error("expected bin");
  if (data_.size() - pos_ - header < length) return Error("truncated bin");
  std::string_view out = data_.substr(pos_ + header, length);
  pos_ += header + length;
  return out;
}

StatusOr<uint32_t> MsgpackReader::ReadArrayHeader() {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  if (type != Type::kArray) return Error("expected an array");
  // Each element takes at least one byte: a larger count cannot be honest.
  if (length > data_.size() - pos_ - header) return Error("array longer than the input");
  pos_ += header;
  return static_cast<uint32_t>(length);
}

StatusOr<uint32_t> MsgpackReader::ReadMapHeader() {
  Type type;
  size_t header;
  uint64_t length;
  TANDEM_RETURN_IF_ERROR(Header(&type, &header, &length));
  if (type != Type::kMap) return Error("expected a map");
  if (length > (data_.size() - pos_ - header) / 2) return Error("map longer than the input");
  pos_ += header;
  return static_cast<uint32_t>(length);
}

Status MsgpackReader::Skip() {
  uint64_t pending = 1;  // values still to skip
  const size_t start = pos_;
  while (pending > 0) {
    Type type;
    size_t header;
    uint64_t length;
    if (Status s = Header(&type, &header, &length); !s.ok()) {
      pos_ = start;
      return s;
    }
    --pending;
    uint64_t payload = 0;
    if (type == Type::kStr || type == Type::kBin || type == Type::kExt) {
      payload = length;
    } else if (type == Type::kArray) {
      pending += length;
    } else if (type == Type::kMap) {
      pending += 2 * length;
    }
    if (data_.size() - pos_ - header < payload || pending > data_.size()) {
      pos_ = start;
      return Error("truncated value");
    }
    pos_ += header + payload;
  }
  return Status::Ok();
}

}  // namespace tandem
