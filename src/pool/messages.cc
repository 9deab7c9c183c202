#include "pool/messages.h"

namespace tandem::pool {
namespace {

// A response of `n` fixed-size answers must be exactly that long; checked before any
// allocation, so a hostile `n`-sized reservation cannot come from a short body.
Status CheckFixedSize(std::string_view body, size_t n, size_t answer_bytes) {
  if (n > kMaxBodyBytes / answer_bytes || body.size() != n * answer_bytes) {
    return InvalidArgumentError("response body of " + std::to_string(body.size()) + " bytes for " +
                                std::to_string(n) + " answers");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeHelloRequest(const HelloRequest& request) {
  BodyWriter w;
  w.String(request.auth_token);
  w.U8(request.role);
  return std::move(w.data());
}

Status DecodeHelloRequest(std::string_view body, HelloRequest* out) {
  BodyReader r(body);
  TANDEM_RETURN_IF_ERROR(r.String(&out->auth_token, kMaxTokenBytes));
  TANDEM_RETURN_IF_ERROR(r.U8(&out->role));
  return r.Finish();
}

std::string EncodeHelloResponse(const HelloResponse& response) {
  BodyWriter w;
  w.U64(response.arena_bytes);
  w.String(response.worker_address);
  return std::move(w.data());
}

Status DecodeHelloResponse(std::string_view body, HelloResponse* out) {
  BodyReader r(body);
  TANDEM_RETURN_IF_ERROR(r.U64(&out->arena_bytes));
  TANDEM_RETURN_IF_ERROR(r.String(&out->worker_address, kMaxAddressBytes));
  return r.Finish();
}

std::string EncodeKeys(const std::vector<std::string>& keys) {
  BodyWriter w;
  w.Keys(keys);
  return std::move(w.data());
}

Status DecodeKeys(std::string_view body, std::vector<std::string>* keys, uint32_t max_keys) {
  BodyReader r(body);
  TANDEM_RETURN_IF_ERROR(r.Keys(keys, max_keys));
  return r.Finish();
}

std::string EncodePutAllocRequest(const std::vector<PutAllocItem>& items) {
  BodyWriter w;
  w.U32(static_cast<uint32_t>(items.size()));
  for (const auto& item : items) {
    w.String(item.key);
    w.U64(item.size_bytes);
  }
  return std::move(w.data());
}

Status DecodePutAllocRequest(std::string_view body, std::vector<PutAllocItem>* out) {
  BodyReader r(body);
  uint32_t n = 0;
  TANDEM_RETURN_IF_ERROR(r.Count(&n));
  out->resize(n);
  for (auto& item : *out) {
    TANDEM_RETURN_IF_ERROR(r.Key(&item.key));
    TANDEM_RETURN_IF_ERROR(r.U64(&item.size_bytes));
  }
  return r.Finish();
}

std::string EncodePutAllocResponse(const std::vector<PutAllocAnswer>& answers) {
  BodyWriter w;
  for (const auto& a : answers) {
    w.U8(a.code);
    w.U64(a.offset);
  }
  return std::move(w.data());
}

Status DecodePutAllocResponse(std::string_view body, size_t n, std::vector<PutAllocAnswer>* out) {
  TANDEM_RETURN_IF_ERROR(CheckFixedSize(body, n, 9));
  BodyReader r(body);
  out->resize(n);
  for (auto& a : *out) {
    TANDEM_RETURN_IF_ERROR(r.U8(&a.code));
    TANDEM_RETURN_IF_ERROR(r.U64(&a.offset));
  }
  return r.Finish();
}

std::string EncodePutSealRequest(const std::vector<PutSealItem>& items) {
  BodyWriter w;
  w.U32(static_cast<uint32_t>(items.size()));
  for (const auto& item : items) {
    w.String(item.key);
    w.U8(item.commit ? 1 : 0);
  }
  return std::move(w.data());
}

Status DecodePutSealRequest(std::string_view body, std::vector<PutSealItem>* out) {
  BodyReader r(body);
  uint32_t n = 0;
  TANDEM_RETURN_IF_ERROR(r.Count(&n));
  out->resize(n);
  for (auto& item : *out) {
    uint8_t commit = 0;
    TANDEM_RETURN_IF_ERROR(r.Key(&item.key));
    TANDEM_RETURN_IF_ERROR(r.U8(&commit));
    item.commit = commit != 0;
  }
  return r.Finish();
}

std::string EncodeSoftPinRequest(uint32_t ttl_ms, const std::vector<std::string>& keys) {
  BodyWriter w;
  w.U32(ttl_ms);
  w.Keys(keys);
  return std::move(w.data());
}

Status DecodeSoftPinRequest(std::string_view body, uint32_t* ttl_ms,
                            std::vector<std::string>* keys) {
  BodyReader r(body);
  TANDEM_RETURN_IF_ERROR(r.U32(ttl_ms));
  TANDEM_RETURN_IF_ERROR(r.Keys(keys));
  return r.Finish();
}

std::string EncodeCodes(const std::vector<uint8_t>& codes) {
  return std::string(codes.begin(), codes.end());
}

Status DecodeCodes(std::string_view body, size_t n, std::vector<uint8_t>* out) {
  TANDEM_RETURN_IF_ERROR(CheckFixedSize(body, n, 1));
  out->assign(body.begin(), body.end());
  return Status::Ok();
}

std::string EncodeGetResponse(const std::vector<GetAnswer>& answers) {
  BodyWriter w;
  for (const auto& a : answers) {
    w.U8(a.code);
    w.U64(a.offset);
    w.U64(a.size_bytes);
  }
  return std::move(w.data());
}

Status DecodeGetResponse(std::string_view body, size_t n, std::vector<GetAnswer>* out) {
  TANDEM_RETURN_IF_ERROR(CheckFixedSize(body, n, 17));
  BodyReader r(body);
  out->resize(n);
  for (auto& a : *out) {
    TANDEM_RETURN_IF_ERROR(r.U8(&a.code));
    TANDEM_RETURN_IF_ERROR(r.U64(&a.offset));
    TANDEM_RETURN_IF_ERROR(r.U64(&a.size_bytes));
  }
  return r.Finish();
}

std::string EncodeDirUpdateRequest(const DirUpdateRequest& request) {
  BodyWriter w;
  w.String(request.holder);
  w.Keys(request.keys);
  return std::move(w.data());
}

Status DecodeDirUpdateRequest(std::string_view body, DirUpdateRequest* out) {
  BodyReader r(body);
  TANDEM_RETURN_IF_ERROR(r.String(&out->holder, kMaxAddressBytes));
  TANDEM_RETURN_IF_ERROR(r.Keys(&out->keys));
  return r.Finish();
}

std::string EncodeDirLookupResponse(const std::vector<std::string>& holders) {
  BodyWriter w;
  for (const auto& h : holders) w.String(h);
  return std::move(w.data());
}

Status DecodeDirLookupResponse(std::string_view body, size_t n, std::vector<std::string>* out) {
  // Each holder takes at least its 4-byte length: a count the body cannot hold is refused
  // before anything is allocated for it.
  if (n > body.size() / 4) return InvalidArgumentError("truncated frame body");
  BodyReader r(body);
  out->resize(n);
  for (auto& h : *out) TANDEM_RETURN_IF_ERROR(r.String(&h, kMaxAddressBytes));
  return r.Finish();
}

Status DecodeFetchResponse(std::string_view body, size_t n,
                           std::vector<std::optional<std::string_view>>* objects) {
  if (n > body.size()) return InvalidArgumentError("truncated frame body");
  BodyReader r(body);
  objects->assign(n, std::nullopt);
  for (auto& item : *objects) {
    uint8_t found = 0;
    TANDEM_RETURN_IF_ERROR(r.U8(&found));
    if (found) {
      std::string_view data;
      TANDEM_RETURN_IF_ERROR(r.StringView(&data, kMaxObjectBytes));
      item = data;
    }
  }
  return r.Finish();
}

std::string EncodeFetchHead(std::optional<uint32_t> size_bytes) {
  BodyWriter w;
  w.U8(size_bytes.has_value() ? 1 : 0);
  if (size_bytes.has_value()) w.U32(*size_bytes);
  return std::move(w.data());
}

}  // namespace tandem::pool
