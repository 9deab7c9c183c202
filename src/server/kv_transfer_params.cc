#include "server/kv_transfer_params.h"

#include "server/json_fields.h"

namespace tandem::server {
namespace {

bool ReadInt(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else if (it->is_string()) {
    try {
      size_t used = 0;
      const std::string s = it->get<std::string>();
      *out = std::stoll(s, &used);
      if (used != s.size()) return false;
    } catch (...) {
      return false;
    }
  } else {
    return false;
  }
  return *out >= lo && *out <= hi;
}

// Whether `key` is the boolean true. (Json::value(key, false) would throw for a value
// of another type, and these come from the client.)
bool IsTrue(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

RequestKvTransfer ParseRequestKvTransfer(const std::string& json) {
  if (json.empty()) return {};
  return ParseRequestKvTransfer(Json::parse(json, nullptr, /*allow_exceptions=*/false));
}

RequestKvTransfer ParseRequestKvTransfer(const Json& j) {
  RequestKvTransfer out;
  if (!j.is_object()) return out;
  out.do_remote_decode = IsTrue(j, "do_remote_decode");
  if (!IsTrue(j, "do_remote_prefill")) return out;
  KvTransferParams p;
  auto str = [&](const char* key, std::string* v) {
    auto it = j.find(key);
    if (it == j.end()) return false;
    if (it->is_string()) {
      *v = it->get<std::string>();
    } else if (it->is_number_integer()) {
      *v = std::to_string(it->get<int64_t>());
    } else {
      return false;
    }
    return !v->empty();
  };
  int64_t port = 0;
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  int64_t last = -1;
  if (!str("remote_request_id", &p.remote_request_id) || !str("remote_host", &p.remote_host) ||
      !ReadInt(j, "remote_port", 1, 65535, &port) || !ReadInt(j, "remote_block_size", 1, 1 << 20, &block_size)) {
    out.problem = "kv_transfer_params needs remote_request_id, remote_host, remote_port and remote_block_size";
    return out;
  }
  str("remote_engine_id", &p.remote_engine_id);
  auto ids = j.find("remote_block_ids");
  if (ids == j.end() || !ids->is_array()) {
    out.problem = "kv_transfer_params.remote_block_ids must be a list of block ids";
    return out;
  }
  for (const Json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 0x7FFFFFFF) {
      out.problem = "kv_transfer_params.remote_block_ids must be a list of block ids";
      return out;
    }
    p.remote_block_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  if (!ReadInt(j, "num_prompt_blocks", 0, 1 << 30, &num_blocks)) num_blocks = static_cast<int64_t>(p.remote_block_ids.size());
  if (!ReadInt(j, "last_token_id", 0, 0x7FFFFFFF, &last)) last = -1;
  p.remote_port = static_cast<int>(port);
  p.remote_block_size = static_cast<int>(block_size);
  p.num_prompt_blocks = static_cast<int>(num_blocks);
  p.last_token_id = static_cast<int32_t>(last);
  out.remote_prefill = std::move(p);
  return out;
}

std::string KvTransferParamsJson(const KvTransferParams& p) {
  Json j;
  j["do_remote_prefill"] = true;
  j["do_remote_decode"] = false;
  j["remote_engine_id"] = p.remote_engine_id;
  j["remote_request_id"] = p.remote_request_id;
  j["remote_host"] = p.remote_host;
  j["remote_port"] = p.remote_port;
  j["remote_block_ids"] = p.remote_block_ids;
  j["remote_block_size"] = p.remote_block_size;
  j["num_prompt_blocks"] = p.num_prompt_blocks;
  j["last_token_id"] = p.last_token_id;
  return DumpJson(j);
}

}  // namespace tandem::server
