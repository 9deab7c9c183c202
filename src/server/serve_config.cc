#include "server/serve_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/byte_size.h"
#include "net/kv_events_config.h"
#include "server/json_fields.h"
#include "common/logging.h"
#include "engine/kv_cache_utils.h"
#include "engine/spec_decode.h"
#include "kv_connector/kv_connector_factory.h"
#include "kv_connector/kv_transfer_config.h"

namespace tandem::server {

Status ValidateJsonObjectFlag(std::string_view flag, const std::string& value) {
  if (value.empty()) return Status();
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return InvalidArgumentError(std::string(flag) + ": not valid JSON: " + value);
  if (!parsed.is_object())
    return InvalidArgumentError(std::string(flag) + ": expected a JSON object, got " + value);
  return Status();
}

namespace {

void RedactInPlace(Json& value) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      std::string key = it.key();
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      const bool secret = key == "auth_token" || key == "api_key" || key == "password" ||
                          key == "secret" || key == "token";
      if (secret && !it.value().is_null()) {
        it.value() = "***";
      } else {
        RedactInPlace(it.value());
      }
    }
  } else if (value.is_array()) {
    for (Json& item : value) RedactInPlace(item);
  }
}

}  // namespace

std::string RedactSecrets(const std::string& json_text) {
  Json parsed = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return "<not JSON>";
  RedactInPlace(parsed);
  return parsed.dump();
}

std::vector<std::string> JsonObjectKeys(const std::string& value) {
  std::vector<std::string> keys;
  Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    for (auto it = parsed.begin(); it != parsed.end(); ++it) keys.push_back(it.key());
  }
  return keys;
}

StatusOr<net::HttpServerOptions> MakeHttpOptions(const ServeConfig& config) {
  net::HttpServerOptions http;
  http.host = config.host;
  http.port = static_cast<uint16_t>(config.port);
  http.io_threads = 2;
  auto body = ParseByteSize(config.max_body_bytes);
  if (!body.ok()) return InvalidArgumentError("--max-body-bytes: " + body.status().message());
  auto header = ParseByteSize(config.max_header_bytes);
  if (!header.ok()) return InvalidArgumentError("--max-header-bytes: " + header.status().message());
  // Beast needs room for at least a request line and a few headers.
  if (*header < 1024) return InvalidArgumentError("--max-header-bytes must be at least 1KiB");
  if (config.max_connections < 1) return InvalidArgumentError("--max-connections must be positive");
  http.max_body_bytes = static_cast<size_t>(*body);
  http.max_header_bytes = static_cast<size_t>(*header);
  http.max_connections = static_cast<size_t>(config.max_connections);
  return http;
}

StatusOr<EngineOptions> MakeEngineOptions(const ServeConfig& config,
                                          const std::vector<int>& cpu_ids) {
  if (!(config.gpu_memory_utilization > 0 && config.gpu_memory_utilization <= 1)) {
    return InvalidArgumentError("--gpu-memory-utilization must be in (0, 1], got " +
                                std::to_string(config.gpu_memory_utilization));
  }
  auto budget = ParseByteSize(config.kv_cache_memory);
  if (!budget.ok()) return InvalidArgumentError("--kv-cache-memory: " + budget.status().message());
  if (config.max_model_len < 0) return InvalidArgumentError("--max-model-len must be positive");
  if (!(config.health_watchdog_s > 0))
    return InvalidArgumentError("--health-watchdog-s must be positive");
  EngineOptions options;
  options.kv_connector_factory = CreateKvConnector;  // the connectors kv_transfer / pool ask for
  if (config.scheduling_policy == "priority") {
    options.scheduling_policy = EngineOptions::SchedulingPolicy::kPriority;
  } else if (config.scheduling_policy != "fcfs") {
    return InvalidArgumentError("--scheduling-policy must be fcfs or priority, got '" +
                                config.scheduling_policy + "'");
  }
  options.health_watchdog_s = config.health_watchdog_s;
  options.block_size = config.block_size;
  TANDEM_ASSIGN_OR_RETURN(options.kv_cache_dtype, ParseKvCacheDtype(config.kv_cache_dtype));
  options.kv_cache_bytes =
      static_cast<int64_t>(static_cast<double>(*budget) * config.gpu_memory_utilization);
  options.max_num_seqs = config.max_num_seqs;
  options.max_num_batched_tokens = config.max_num_batched_tokens;
  options.max_model_len = config.max_model_len;
  options.max_waiting = config.max_waiting_requests;
  options.enable_prefix_caching = config.enable_prefix_caching;
  options.enable_chunked_prefill = config.enable_chunked_prefill;
  options.threads = config.threads;
  options.cpu_ids = cpu_ids;
  options.model_name =
      config.served_model_names.empty() ? config.model : config.served_model_names.front();
  TANDEM_RETURN_IF_ERROR(ValidateSchedulerLimits(options));  // the engine's own check, at flag time
  options.engine_index = config.data_parallel_rank;
  {
    std::string unsupported;
    TANDEM_ASSIGN_OR_RETURN(options.speculative, ParseSpeculativeConfig(config.speculative_config, &unsupported));
    if (!unsupported.empty()) TANDEM_LOG(WARNING) << "--speculative-config: " << unsupported;
  }
  if (!config.additional_config.empty()) {
    TANDEM_RETURN_IF_ERROR(ValidateJsonObjectFlag("--additional-config", config.additional_config));
    const Json extra = Json::parse(config.additional_config, nullptr, /*allow_exceptions=*/false);
    if (auto it = extra.find("recompute_scheduler_enable"); it != extra.end()) {
      if (!it->is_boolean()) {
        return InvalidArgumentError("--additional-config: recompute_scheduler_enable must be true or false");
      }
      options.recompute_scheduler = it->get<bool>();
    }
  }
  if (!config.kv_transfer_config.empty()) {
    TANDEM_ASSIGN_OR_RETURN(transfer::KvTransferConfig kv, transfer::ParseKvTransferConfig(config.kv_transfer_config));
    if (std::string ignored = transfer::IgnoredKeysMessage(kv); !ignored.empty()) TANDEM_LOG(WARNING) << ignored;
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
      p.soft_pin_ttl_s = kv.pool->soft_pin_ttl_s;
    }
  }
  return options;
}

std::vector<std::string> AdditionalConfigIgnoredKeys(const std::string& additional_config) {
  std::vector<std::string> keys = JsonObjectKeys(additional_config);
  std::erase(keys, std::string("recompute_scheduler_enable"));
  return keys;
}

StatusOr<std::optional<net::KvEventPublisherOptions>> MakeKvEventPublisherOptions(
    const ServeConfig& config) {
  if (config.kv_events_config.empty()) return std::optional<net::KvEventPublisherOptions>();
  TANDEM_ASSIGN_OR_RETURN(net::KvEventsConfig events,
                          net::ParseKvEventsConfig(config.kv_events_config));
  if (!events.publishes()) return std::optional<net::KvEventPublisherOptions>();
  net::KvEventPublisherOptions o;
  TANDEM_ASSIGN_OR_RETURN(o.endpoint,
                          net::OffsetEndpointPort(events.endpoint, config.data_parallel_rank));
  TANDEM_ASSIGN_OR_RETURN(o.replay_endpoint, net::OffsetEndpointPort(events.replay_endpoint,
                                                                     config.data_parallel_rank));
  o.buffer_steps = events.buffer_steps;
  o.hwm = events.hwm;
  o.max_queue_size = events.max_queue_size;
  o.topic = events.topic;
  return std::optional<net::KvEventPublisherOptions>(std::move(o));
}

}  // namespace tandem::server
