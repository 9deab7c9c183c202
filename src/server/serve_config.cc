#include "server/serve_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "server/json_fields.h"
#include "transfer/kv_transfer_config.h"

namespace tandem::server {

StatusOr<int64_t> ParseByteSize(std::string_view text) {
  const std::string original(text);
  auto bad = [&] {
    return InvalidArgumentError("bad size '" + original +
                                "' (expected e.g. 4GiB, 512MiB or a byte count)");
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  const std::string number(text.substr(0, digits));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad();
  std::string unit;
  for (char c : text.substr(digits)) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  double scale = 1;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else {
    const std::string prefixes = "kmgt";
    size_t power = prefixes.find(unit[0]);
    if (power == std::string::npos) return bad();
    std::string rest = unit.substr(1);
    double base;
    if (rest == "ib") {
      base = 1024;
    } else if (rest.empty() || rest == "b") {
      base = 1000;
    } else {
      return bad();
    }
    scale = std::pow(base, static_cast<double>(power + 1));
  }
  double bytes = value * scale;
  if (bytes < 1 || bytes > 9.0e18) return bad();
  return static_cast<int64_t>(bytes);
}

Status ValidateJsonObjectFlag(std::string_view flag, const std::string& value) {
  if (value.empty()) return Status();
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return InvalidArgumentError(std::string(flag) + ": not valid JSON: " + value);
  if (!parsed.is_object())
    return InvalidArgumentError(std::string(flag) + ": expected a JSON object, got " + value);
  return Status();
}

std::vector<std::string> JsonObjectKeys(const std::string& value) {
  std::vector<std::string> keys;
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    for (auto it = parsed.begin(); it != parsed.end(); ++it) keys.push_back(it.key());
  }
  return keys;
}

StatusOr<EngineOptions> MakeEngineOptions(const ServeConfig& config,
                                          const std::vector<int>& cpu_ids) {
  if (!(config.gpu_memory_utilization > 0 && config.gpu_memory_utilization <= 1)) {
    return InvalidArgumentError("--gpu-memory-utilization must be in (0, 1], got " +
                                std::to_string(config.gpu_memory_utilization));
  }
  auto budget = ParseByteSize(config.kv_cache_memory);
  if (!budget.ok()) return InvalidArgumentError("--kv-cache-memory: " + budget.status().message());
  if (config.block_size <= 0 || config.block_size > 1024) {
    return InvalidArgumentError("--block-size must be in [1, 1024], got " +
                                std::to_string(config.block_size));
  }
  if (config.max_num_seqs <= 0) return InvalidArgumentError("--max-num-seqs must be positive");
  if (config.max_num_batched_tokens <= 0)
    return InvalidArgumentError("--max-num-batched-tokens must be positive");
  if (config.max_waiting_requests <= 0)
    return InvalidArgumentError("--max-waiting-requests must be positive");
  if (config.max_model_len < 0) return InvalidArgumentError("--max-model-len must be positive");
  EngineOptions options;
  options.block_size = config.block_size;
  options.kv_cache_bytes =
      static_cast<int64_t>(static_cast<double>(*budget) * config.gpu_memory_utilization);
  options.max_num_seqs = config.max_num_seqs;
  options.max_num_batched_tokens = config.max_num_batched_tokens;
  options.max_model_len = config.max_model_len;
  options.max_waiting = config.max_waiting_requests;
  options.enable_prefix_caching = config.enable_prefix_caching;
  options.threads = config.threads;
  options.cpu_ids = cpu_ids;
  options.model_name =
      config.served_model_names.empty() ? config.model : config.served_model_names.front();
  if (!config.kv_transfer_config.empty()) {
    TANDEM_ASSIGN_OR_RETURN(transfer::KvTransferConfig kv, transfer::ParseKvTransferConfig(config.kv_transfer_config));
    if (kv.transfer) {
      KvTransferOptions& t = options.kv_transfer;
      t.producer = kv.transfer->role != transfer::KvRole::kConsumer;
      t.consumer = kv.transfer->role != transfer::KvRole::kProducer;
      // vLLM's Mooncake connector: one transfer port per rank, kv_port + dp_rank * tp_size.
      const int64_t port = static_cast<int64_t>(kv.transfer->kv_port) +
                           static_cast<int64_t>(config.data_parallel_rank) * config.tensor_parallel_size;
      if (port > 65535) {
        return InvalidArgumentError("--kv-transfer-config: kv_port " + std::to_string(kv.transfer->kv_port) +
                                    " + data-parallel rank offset exceeds 65535");
      }
      t.port = static_cast<int>(port);
      t.engine_id = kv.engine_id.empty() ? "0" : kv.engine_id;
      if (config.data_parallel_size > 1) t.engine_id += "_dp" + std::to_string(config.data_parallel_rank);
      t.bind_host = config.host;
      const bool wildcard = config.host.empty() || config.host == "0.0.0.0" || config.host == "::";
      t.advertise_host = !kv.transfer->kv_ip.empty() ? kv.transfer->kv_ip : wildcard ? "" : config.host;
      t.recompute_on_failure = kv.load_failure_policy == transfer::LoadFailurePolicy::kRecompute;
      t.lease_s = kv.transfer->lease_s;
      t.auth_token = kv.transfer->auth_token;
      t.lease_cap_s = std::max(config.kv_lease_cap_s, t.lease_s);
    }
    if (kv.pool) {
      // vLLM-Ascend's AscendStoreConnector: producers save and load; a consumer only if
      // consumer_is_to_put / consumer_is_to_load say so.
      PoolOptions& p = options.pool;
      const bool consumer = kv.pool->role == transfer::KvRole::kConsumer;
      p.enabled = true;
      p.save = !consumer || kv.pool->consumer_is_to_put;
      p.load = !consumer || kv.pool->consumer_is_to_load;
      p.load_async = kv.pool->load_async;
    }
  }
  return options;
}

}  // namespace tandem::server
