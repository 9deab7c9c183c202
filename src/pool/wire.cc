#include "pool/wire.h"

#include <cstring>

namespace tandem::pool {
namespace {

void PutLe(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

}  // namespace

bool IsKnownType(uint16_t type) { return (type >= 1 && type <= 7) || (type >= 16 && type <= 19); }

bool IsPeerType(MsgType type) { return static_cast<uint16_t>(type) >= 16; }

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderBytes]) {
  PutLe(out, kFrameMagic, 4);
  PutLe(out + 4, kWireVersion, 2);
  PutLe(out + 6, static_cast<uint16_t>(h.type), 2);
  PutLe(out + 8, h.status, 2);
  PutLe(out + 10, 0, 2);
  PutLe(out + 12, h.body_len, 4);
  PutLe(out + 16, h.request_id, 8);
}

Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* h) {
  if (GetLe(in, 4) != kFrameMagic) return InvalidArgumentError("bad frame magic");
  uint16_t version = static_cast<uint16_t>(GetLe(in + 4, 2));
  if (version != kWireVersion) {
    return InvalidArgumentError("unsupported wire version " + std::to_string(version));
  }
  uint16_t type = static_cast<uint16_t>(GetLe(in + 6, 2));
  if (!IsKnownType(type)) return InvalidArgumentError("unknown frame type " + std::to_string(type));
  h->type = static_cast<MsgType>(type);
  h->status = static_cast<uint16_t>(GetLe(in + 8, 2));
  h->body_len = static_cast<uint32_t>(GetLe(in + 12, 4));
  h->request_id = GetLe(in + 16, 8);
  if (h->body_len > kMaxBodyBytes) {
    return InvalidArgumentError("frame body of " + std::to_string(h->body_len) +
                                " bytes exceeds the limit");
  }
  return Status::Ok();
}

void BodyWriter::U32(uint32_t v) {
  uint8_t b[4];
  PutLe(b, v, 4);
  data_.append(reinterpret_cast<char*>(b), 4);
}

void BodyWriter::U64(uint64_t v) {
  uint8_t b[8];
  PutLe(b, v, 8);
  data_.append(reinterpret_cast<char*>(b), 8);
}

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
  *v = static_cast<uint32_t>(GetLe(reinterpret_cast<const uint8_t*>(body_.data() + pos_), 4));
  pos_ += 4;
  return Status::Ok();
}

Status BodyReader::U64(uint64_t* v) {
  if (body_.size() - pos_ < 8) return InvalidArgumentError("truncated frame body");
  *v = GetLe(reinterpret_cast<const uint8_t*>(body_.data() + pos_), 8);
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
