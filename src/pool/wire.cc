#include "pool/wire.h"

#include <cstring>

#include "common/little_endian.h"

namespace tandem::pool {

using little_endian::Load;
using little_endian::Store;

bool IsKnownType(uint16_t type) { return (type >= 1 && type <= 7) || (type >= 16 && type <= 19); }

bool IsPeerType(MsgType type) { return static_cast<uint16_t>(type) >= 16; }

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderBytes]) {
  Store<uint32_t>(out, kFrameMagic);
  Store<uint16_t>(out + 4, kWireVersion);
  Store<uint16_t>(out + 6, static_cast<uint16_t>(h.type));
  Store<uint16_t>(out + 8, h.status);
  Store<uint16_t>(out + 10, 0);
  Store<uint32_t>(out + 12, h.body_len);
  Store<uint64_t>(out + 16, h.request_id);
}

Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* h) {
  if (Load<uint32_t>(in) != kFrameMagic) return InvalidArgumentError("bad frame magic");
  uint16_t version = Load<uint16_t>(in + 4);
  if (version != kWireVersion) {
    return InvalidArgumentError("unsupported wire version " + std::to_string(version));
  }
  uint16_t type = Load<uint16_t>(in + 6);
  if (!IsKnownType(type)) return InvalidArgumentError("unknown frame type " + std::to_string(type));
  h->type = static_cast<MsgType>(type);
  h->status = Load<uint16_t>(in + 8);
  h->body_len = Load<uint32_t>(in + 12);
  h->request_id = Load<uint64_t>(in + 16);
  if (h->body_len > kMaxBodyBytes) {
    return InvalidArgumentError("frame body of " + std::to_string(h->body_len) +
                                " bytes exceeds the limit");
  }
  return Status::Ok();
}

void BodyWriter::U32(uint32_t v) { little_endian::Append<uint32_t>(&data_, v); }

void BodyWriter::U64(uint64_t v) { little_endian::Append<uint64_t>(&data_, v); }

void BodyWriter::String(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  data_.append(s);
}

void BodyWriter::Keys(const std::vector<std::string>& keys) {
  U32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) String(k);
}

Status BodyReader::U8(uint8_t* v) {
  if (body_.size() - pos_ < 1) return InvalidArgumentError("truncated frame body");
  *v = static_cast<uint8_t>(body_[pos_++]);
  return Status::Ok();
}

Status BodyReader::U32(uint32_t* v) {
  if (body_.size() - pos_ < 4) return InvalidArgumentError("truncated frame body");
  *v = Load<uint32_t>(reinterpret_cast<const uint8_t*>(body_.data() + pos_));
  pos_ += 4;
  return Status::Ok();
}

Status BodyReader::U64(uint64_t* v) {
  if (body_.size() - pos_ < 8) return InvalidArgumentError("truncated frame body");
  *v = Load<uint64_t>(reinterpret_cast<const uint8_t*>(body_.data() + pos_));
  pos_ += 8;
  return Status::Ok();
}

Status BodyReader::StringView(std::string_view* s, size_t max_len) {
  uint32_t len = 0;
  TANDEM_RETURN_IF_ERROR(U32(&len));
  if (len > max_len)
    return InvalidArgumentError("string of " + std::to_string(len) + " bytes too long");
  if (body_.size() - pos_ < len) return InvalidArgumentError("truncated frame body");
  *s = body_.substr(pos_, len);
  pos_ += len;
  return Status::Ok();
}

Status BodyReader::String(std::string* s, size_t max_len) {
  std::string_view v;
  TANDEM_RETURN_IF_ERROR(StringView(&v, max_len));
  s->assign(v);
  return Status::Ok();
}

Status BodyReader::Count(uint32_t* n, uint32_t max_n) {
  TANDEM_RETURN_IF_ERROR(U32(n));
  if (*n > max_n) {
    return InvalidArgumentError("batch of " + std::to_string(*n) + " keys exceeds " +
                                std::to_string(max_n));
  }
  return Status::Ok();
}

Status BodyReader::Key(std::string* key) {
  TANDEM_RETURN_IF_ERROR(String(key, kMaxKeyBytes));
  if (key->empty()) return InvalidArgumentError("empty key");
  return Status::Ok();
}

Status BodyReader::Keys(std::vector<std::string>* keys, uint32_t max_n) {
  uint32_t n = 0;
  TANDEM_RETURN_IF_ERROR(Count(&n, max_n));
  keys->resize(n);
  for (auto& k : *keys) TANDEM_RETURN_IF_ERROR(Key(&k));
  return Status::Ok();
}

Status BodyReader::Finish() const {
  if (pos_ != body_.size()) return InvalidArgumentError("trailing bytes in frame body");
  return Status::Ok();
}

Status StatusFromResponse(const FrameHeader& header, std::string_view body) {
  if (header.status == 0) return Status::Ok();
  auto code = header.status <= static_cast<uint16_t>(StatusCode::kUnauthenticated)
                  ? static_cast<StatusCode>(header.status)
                  : StatusCode::kInternal;
  return Status(code, "pool worker: " + std::string(body.substr(0, 4096)));
}

uint16_t WireStatus(const Status& status) { return static_cast<uint16_t>(status.code()); }

}  // namespace tandem::pool
