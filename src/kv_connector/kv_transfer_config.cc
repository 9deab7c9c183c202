#include "kv_connector/kv_transfer_config.h"

#include <charconv>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace tandem::transfer {
namespace {

using Json = nlohmann::json;

Status Bad(const std::string& path, const std::string& what) {
  return InvalidArgumentError("--kv-transfer-config: " + path + ": " + what);
}

const char* TypeName(const Json& j) { return j.type_name(); }

StatusOr<std::string> GetString(const Json& obj, const char* key, const std::string& path, std::string def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_string()) return Bad(path + "." + key, std::string("expected a string, got ") + TypeName(*it));
  return it->get<std::string>();
}

StatusOr<int64_t> GetInt(const Json& obj, const char* key, const std::string& path, int64_t def, int64_t lo,
                         int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  int64_t v = 0;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_string()) {
    const std::string s = it->get<std::string>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return Bad(path + "." + key, "expected an integer or a numeric string, got \"" + s + "\"");
    }
  } else {
    return Bad(path + "." + key, std::string("expected an integer or a numeric string, got ") + TypeName(*it));
  }
  if (v < lo || v > hi) {
    return Bad(path + "." + key, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
  }
  return v;
}

StatusOr<double> GetDouble(const Json& obj, const char* key, const std::string& path, double def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_number()) return Bad(path + "." + key, std::string("expected a number, got ") + TypeName(*it));
  const double v = it->get<double>();
  if (!(v > 0) || v > 1e6) return Bad(path + "." + key, "must be a positive number of seconds");
  return v;
}

StatusOr<bool> GetBool(const Json& obj, const char* key, const std::string& path, bool def) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (s == "true" || s == "True" || s == "1") return true;
    if (s == "false" || s == "False" || s == "0") return false;
  }
  return Bad(path + "." + key, std::string("expected a boolean, got ") + it->dump());
}

StatusOr<const Json*> GetObject(const Json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!it->is_object()) return Bad(path + "." + key, std::string("expected an object, got ") + TypeName(*it));
  return &*it;
}

StatusOr<KvRole> ParseRole(const Json& obj, const std::string& path, KvRole def) {
  TANDEM_ASSIGN_OR_RETURN(std::string role, GetString(obj, "kv_role", path, ""));
  if (role.empty()) return def;
  if (role == "kv_producer") return KvRole::kProducer;
  if (role == "kv_consumer") return KvRole::kConsumer;
  if (role == "kv_both") return KvRole::kBoth;
  return Bad(path + ".kv_role", "unknown role \"" + role + "\" (expected kv_producer, kv_consumer or kv_both)");
}

// kv_connector_extra_config.prefill / .decode ({dp_size, tp_size}): type-checked only.
Status CheckParallel(const Json& extra, const char* key, const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(const Json* obj, GetObject(extra, key, path));
  if (obj == nullptr) return Status::Ok();
  const std::string sub = path + "." + key;
  TANDEM_RETURN_IF_ERROR(GetInt(*obj, "dp_size", sub, 1, 1, 1 << 16).status());
  return GetInt(*obj, "tp_size", sub, 1, 1, 1 << 16).status();
}

using KeyReasons = std::vector<std::pair<std::string, std::string>>;

// Files each key of `obj` not in `used` under out->without_effect, with its reason from
// `reasons`, or else under out->unknown_keys.
void NoteUnused(const Json& obj, const std::string& path, const std::vector<std::string>& used,
                const KeyReasons& reasons, KvTransferConfig* out) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(used.begin(), used.end(), key) != used.end()) continue;
    auto why = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == key; });
    if (why != reasons.end()) {
      out->without_effect.push_back(path + "." + key + " (" + why->second + ")");
    } else {
      out->unknown_keys.push_back(path + "." + key);
    }
  }
}

// The keys of a connector object (top level or one of MultiConnector's) that the
// parser reads, and the reasons of those that vLLM defines but nothing here reads.
void NoteUnusedConnectorKeys(const Json& obj, const std::string& path, bool transfer, bool multi, bool nested,
                             KvTransferConfig* out) {
  std::vector<std::string> used = {"kv_connector", "kv_role", "kv_connector_extra_config"};
  constexpr const char* kVllmOnly = "a vLLM setting Tandem's connectors do not use";
  KeyReasons reasons = {{"kv_connector_module_path", "Tandem's connectors are built in"},
                        {"kv_buffer_device", kVllmOnly},
                        {"kv_buffer_size", kVllmOnly},
                        {"kv_rank", kVllmOnly},
                        {"kv_parallel_size", kVllmOnly},
                        {"enable_permute_local_kv", kVllmOnly}};
  if (nested) {
    reasons.emplace_back("kv_load_failure_policy", "read at the top level only");
  } else {
    used.insert(used.end(), {"engine_id", "kv_load_failure_policy"});  // ParseKvTransferConfig's
  }
  if (transfer) {
    used.insert(used.end(), {"kv_port", "kv_ip", "engine_id"});
  } else {
    const char* why = multi ? "set it on the transfer connector"
                            : "the pool connector has no port; DS_WORKER_ADDR names the worker";
    reasons.emplace_back("kv_port", why);
    reasons.emplace_back("kv_ip", why);
    if (nested) reasons.emplace_back("engine_id", "the transfer connector's or the top level's is used");
  }
  NoteUnused(obj, path, used, reasons, out);
}

enum class Kind { kTransfer, kPool, kMulti, kUnknown };

Kind KindOf(const std::string& name) {
  if (name == "MooncakeConnectorV1" || name == "MooncakeConnector" || name == "TandemTransferConnector") {
    return Kind::kTransfer;
  }
  if (name == "AscendStoreConnector" || name == "TandemPoolConnector") return Kind::kPool;
  if (name == "MultiConnector") return Kind::kMulti;
  return Kind::kUnknown;
}

// `pool_first`: set when a nested pool connector comes before the transfer connector.
Status ParseConnector(const Json& obj, const std::string& path, KvRole parent_role, KvTransferConfig* out,
                      bool nested, bool* pool_first) {
  if (!obj.is_object()) return Bad(path, std::string("expected an object, got ") + TypeName(obj));
  TANDEM_ASSIGN_OR_RETURN(std::string name, GetString(obj, "kv_connector", path, ""));
  if (name.empty()) return Bad(path + ".kv_connector", "missing");
  TANDEM_ASSIGN_OR_RETURN(KvRole role, ParseRole(obj, path, parent_role));
  TANDEM_ASSIGN_OR_RETURN(const Json* extra_ptr, GetObject(obj, "kv_connector_extra_config", path));
  static const Json kEmpty = Json::object();
  const Json& extra = extra_ptr ? *extra_ptr : kEmpty;
  const std::string extra_path = path + ".kv_connector_extra_config";
  switch (KindOf(name)) {
    case Kind::kTransfer: {
      if (out->transfer) return Bad(path + ".kv_connector", "a second transfer connector");
      TransferConnectorConfig t;
      t.role = role;
      TANDEM_ASSIGN_OR_RETURN(int64_t port, GetInt(obj, "kv_port", path, 30000, 1, 65535));
      t.kv_port = static_cast<int>(port);
      TANDEM_ASSIGN_OR_RETURN(t.kv_ip, GetString(obj, "kv_ip", path, ""));
      TANDEM_RETURN_IF_ERROR(CheckParallel(extra, "prefill", extra_path));
      TANDEM_RETURN_IF_ERROR(CheckParallel(extra, "decode", extra_path));
      TANDEM_ASSIGN_OR_RETURN(t.lease_s, GetDouble(extra, "kv_lease_s", extra_path, 30));
      TANDEM_ASSIGN_OR_RETURN(t.auth_token, GetString(extra, "auth_token", extra_path, ""));
      TANDEM_ASSIGN_OR_RETURN(std::string engine_id, GetString(obj, "engine_id", path, ""));
      if (out->engine_id.empty()) out->engine_id = engine_id;
      out->transfer = t;
      NoteUnusedConnectorKeys(obj, path, /*transfer=*/true, /*multi=*/false, nested, out);
      // prefill / decode: vLLM-Ascend maps P's tensor-parallel ranks onto D's with them;
      // here tensor parallelism is one CPU shard per rank and D pulls from the
      // remote_port the producer put in kv_transfer_params.
      NoteUnused(extra, extra_path, {"kv_lease_s", "auth_token"},
                 {{"prefill", "D pulls from the remote_port in kv_transfer_params; no rank mapping"},
                  {"decode", "D pulls from the remote_port in kv_transfer_params; no rank mapping"},
                  {"use_ascend_direct", "an Ascend transport; Tandem moves KV over TCP or shared memory"}},
                 out);
      break;
    }
    case Kind::kPool: {
      if (out->pool) return Bad(path + ".kv_connector", "a second pool connector");
      PoolConnectorConfig p;
      p.role = role;
      TANDEM_ASSIGN_OR_RETURN(std::string backend, GetString(extra, "backend", extra_path, "yuanrong"));
      if (backend != "yuanrong" && backend != "mooncake") {
        return Bad(extra_path + ".backend", "unknown backend \"" + backend + "\" (expected yuanrong or mooncake)");
      }
      TANDEM_RETURN_IF_ERROR(GetInt(extra, "lookup_rpc_port", extra_path, 0, 0, 65535).status());
      TANDEM_ASSIGN_OR_RETURN(p.load_async, GetBool(extra, "load_async", extra_path, false));
      TANDEM_ASSIGN_OR_RETURN(p.consumer_is_to_put, GetBool(extra, "consumer_is_to_put", extra_path, false));
      TANDEM_ASSIGN_OR_RETURN(p.consumer_is_to_load, GetBool(extra, "consumer_is_to_load", extra_path, true));
      TANDEM_ASSIGN_OR_RETURN(p.soft_pin_ttl_s, GetInt(extra, "soft_pin_ttl_s", extra_path, 0, 0, 7 * 24 * 3600));
      out->pool = p;
      NoteUnusedConnectorKeys(obj, path, /*transfer=*/false, /*multi=*/false, nested, out);
      // The seeds' backend values name the store behind vLLM-Ascend's connector; Tandem
      // has one pool (`tandem pool`), and both values select its client.
      NoteUnused(extra, extra_path, {"load_async", "consumer_is_to_put", "consumer_is_to_load", "soft_pin_ttl_s"},
                 {{"backend", "yuanrong and mooncake both select Tandem's pool client (DS_WORKER_ADDR)"},
                  {"lookup_rpc_port", "pool lookups run in the engine process; no lookup server"}},
                 out);
      break;
    }
    case Kind::kMulti: {
      if (nested) return Bad(path + ".kv_connector", "MultiConnector cannot be nested");
      auto it = extra.find("connectors");
      if (it == extra.end()) return Bad(extra_path + ".connectors", "missing");
      if (!it->is_array() || it->empty()) return Bad(extra_path + ".connectors", "expected a non-empty array");
      NoteUnusedConnectorKeys(obj, path, /*transfer=*/false, /*multi=*/true, nested, out);
      NoteUnused(extra, extra_path, {"connectors"}, {}, out);
      for (size_t i = 0; i < it->size(); ++i) {
        TANDEM_RETURN_IF_ERROR(ParseConnector((*it)[i], extra_path + ".connectors[" + std::to_string(i) + "]", role,
                                              out, true, pool_first));
      }
      // vLLM's MultiConnector loads from the first connector that has the tokens. Here a
      // request with remote-prefill params is always the transfer's, whatever the order,
      // which is vLLM's behaviour for the deployment guides' order (transfer first) only.
      if (*pool_first && out->transfer) {
        out->without_effect.push_back(extra_path +
                                      ".connectors order (the transfer connector loads requests with "
                                      "remote-prefill params, the pool the others, in any order)");
      }
      return Status::Ok();
    }
    case Kind::kUnknown:
      return Bad(path + ".kv_connector", "unknown connector \"" + name +
                                             "\" (supported: MooncakeConnectorV1, TandemTransferConnector, "
                                             "AscendStoreConnector, TandemPoolConnector, MultiConnector)");
  }
  if (nested && KindOf(name) == Kind::kPool && !out->transfer) *pool_first = true;
  return Status::Ok();
}

}  // namespace

const char* KvRoleName(KvRole role) {
  switch (role) {
    case KvRole::kProducer: return "kv_producer";
    case KvRole::kConsumer: return "kv_consumer";
    case KvRole::kBoth: return "kv_both";
  }
  return "?";
}

StatusOr<KvTransferConfig> ParseKvTransferConfig(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for "1e999"
    return InvalidArgumentError(std::string("--kv-transfer-config: invalid JSON: ") + e.what());
  }
  const std::string path = "kv_transfer_config";
  if (!j.is_object()) return Bad(path, std::string("expected a JSON object, got ") + TypeName(j));
  KvTransferConfig config;
  TANDEM_ASSIGN_OR_RETURN(config.role, ParseRole(j, path, KvRole::kBoth));
  TANDEM_ASSIGN_OR_RETURN(config.engine_id, GetString(j, "engine_id", path, ""));
  TANDEM_ASSIGN_OR_RETURN(std::string policy, GetString(j, "kv_load_failure_policy", path, "recompute"));
  if (policy == "recompute") {
    config.load_failure_policy = LoadFailurePolicy::kRecompute;
  } else if (policy == "fail") {
    config.load_failure_policy = LoadFailurePolicy::kFail;
  } else {
    return Bad(path + ".kv_load_failure_policy", "unknown policy \"" + policy + "\" (expected recompute or fail)");
  }
  bool pool_first = false;
  TANDEM_RETURN_IF_ERROR(ParseConnector(j, path, config.role, &config, false, &pool_first));
  return config;
}

std::string IgnoredKeysMessage(const KvTransferConfig& config) {
  std::string message;
  auto list = [&](const char* what, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    if (!message.empty()) message += "; ";
    message += what;
    for (size_t i = 0; i < keys.size(); ++i) message += (i ? ", " : "") + keys[i];
  };
  list("keys without effect (ignored): ", config.without_effect);
  list("unknown keys (ignored): ", config.unknown_keys);
  return message.empty() ? message : "--kv-transfer-config: " + message;
}

}  // namespace tandem::transfer
