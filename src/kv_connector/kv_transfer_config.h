// KvTransferConfig: the `--kv-transfer-config` JSON of vLLM / vLLM-Ascend, parsed.
//
// Accepts vLLM-Ascend's deployment configs verbatim: a single connector (`MooncakeConnectorV1`, alias
// `TandemTransferConnector`: the P->D transfer; `AscendStoreConnector`, alias
// `TandemPoolConnector`: the KV pool) or `MultiConnector` with
// `kv_connector_extra_config.connectors` listing them. Every key is used, or named in
// `without_effect` (a key vLLM or vLLM-Ascend defines that means nothing here:
// `kv_connector_module_path`, `use_ascend_direct`, `lookup_rpc_port`, ...) or in
// `unknown_keys` (vLLM's connector configs take extra keys, so these are not errors);
// the caller logs both once (IgnoredKeysMessage).
// Thread safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::transfer {

enum class KvRole { kProducer, kConsumer, kBoth };
enum class LoadFailurePolicy { kRecompute, kFail };

const char* KvRoleName(KvRole role);

// The P->D transfer connector (MooncakeConnectorV1).
struct TransferConnectorConfig {
  KvRole role = KvRole::kBoth;
  int kv_port = 30000;        // base port of the transfer server (+ dp_rank * tp_size)
  std::string kv_ip;          // address advertised to D (default: VLLM_HOST_IP, --host, ...)
  double lease_s = 30;        // kv_connector_extra_config.kv_lease_s
  std::string auth_token;     // kv_connector_extra_config.auth_token (shared by P and D)
};

// The KV pool connector (AscendStoreConnector).
struct PoolConnectorConfig {
  KvRole role = KvRole::kBoth;
  bool load_async = false;
  bool consumer_is_to_put = false;
  bool consumer_is_to_load = true;
  // kv_connector_extra_config.soft_pin_ttl_s: soft-pin in the pool the blocks a request
  // loaded from it (a prefix reused is a hot one), for this long without a read; 0 = off.
  int64_t soft_pin_ttl_s = 0;
};

struct KvTransferConfig {
  KvRole role = KvRole::kBoth;         // top-level kv_role
  std::string engine_id;               // top-level, or the transfer connector's
  LoadFailurePolicy load_failure_policy = LoadFailurePolicy::kRecompute;
  std::optional<TransferConnectorConfig> transfer;
  std::optional<PoolConnectorConfig> pool;
  // Keys accepted without effect, as "JSON path (why)", in config order. Their values are
  // still type-checked (a bad one is an error naming its path), as vLLM would.
  std::vector<std::string> without_effect;
  // Keys neither Tandem nor vLLM defines, as JSON paths, in config order.
  std::vector<std::string> unknown_keys;
};

// InvalidArgument naming the JSON path of the bad field (e.g.
// "kv_transfer_config.kv_connector_extra_config.connectors[0].kv_port: expected an
// integer or a numeric string") for bad JSON, an unknown connector or role, or a wrong type.
StatusOr<KvTransferConfig> ParseKvTransferConfig(const std::string& json);

// The start-up warning naming `config`'s keys without effect and unknown keys, or ""
// when every key is used.
std::string IgnoredKeysMessage(const KvTransferConfig& config);

}  // namespace tandem::transfer
