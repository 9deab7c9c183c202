// ServeConfig: the values of every `tandem serve` flag (vLLM's names), and the pure
// conversions from them to engine and server options. The CLI only fills this struct
// and calls these functions, so the rules are unit-tested here.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "net/http_server.h"
#include "net/kv_event_publisher.h"

namespace tandem::server {

// vLLM's ParallelConfig.data_parallel_rpc_port default.
inline constexpr int kDefaultDataParallelRpcPort = 29550;

struct ServeConfig {
  std::string model;  // positional or --model
  std::string host = "127.0.0.1";  // loopback unless told otherwise (docs/SECURITY.md)
  int port = 8000;
  std::vector<std::string> served_model_names;  // default: the model path (as vLLM)
  int max_model_len = 0;                        // 0 = the model's context length
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_waiting_requests = 1024;      // queue bound; more get HTTP 503 (Tandem's flag)
  std::string scheduling_policy = "fcfs";  // vLLM's --scheduling-policy: fcfs | priority
  double health_watchdog_s = 60;           // /health answers 503 after this long without a step
  bool enable_chunked_prefill = true;   // --no-enable-chunked-prefill: a prompt runs in one step
  bool enable_prefix_caching = true;
  int block_size = 16;
  std::optional<uint64_t> seed;
  std::string api_key;
  bool no_auth_health_metrics = false;     // /health, /metrics, /version without the api key
  std::string max_body_bytes = "32MiB";    // request bodies over this get 413
  std::string max_header_bytes = "64KiB";  // request line + headers over this get 431
  int max_connections = 10000;             // open connections; more get 503
  bool enable_prompt_tokens_details = false;
  double gpu_memory_utilization = 0.9;   // fraction of kv_cache_memory used for KV blocks
  std::string kv_cache_memory = "1GiB";  // the KV budget on CPU
  std::string kv_cache_dtype = "auto";   // --kv-cache-dtype (kernels/kv_dtype.h; auto = fp16)
  int data_parallel_size = 1;
  int data_parallel_rank = 0;
  std::string data_parallel_address;
  int data_parallel_rpc_port = 0;
  double expert_parallel_timeout_s = 300;  // --expert-parallel-timeout: joining, and one collective
  int tensor_parallel_size = 1;
  bool enable_expert_parallel = false;
  std::string kv_transfer_config;  // JSON (docs/KV_TRANSFER.md; parsed by MakeEngineOptions)
  std::string kv_events_config;    // JSON, vLLM's KVEventsConfig (MakeKvEventPublisherOptions)
  double kv_lease_cap_s = 480;     // env VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT
  std::string speculative_config;  // JSON (validated; used by speculative decoding)
  // JSON (vLLM-Ascend's --additional-config): recompute_scheduler_enable is honoured;
  // every other key is Ascend-only and logged as ignored (AdditionalConfigIgnoredKeys).
  std::string additional_config;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  // Sampling defaults (generation_defaults.h): "auto", "vllm" or a folder; and a JSON
  // object of overrides.
  std::string generation_config = "auto";
  std::string override_generation_config;
  // TEST ONLY (--scripted-output-file, hidden from --help): a file whose text every
  // request generates verbatim, to drive the output parsers with exact model output.
  std::string scripted_output_file;
  int threads = 0;
  std::string cpu_affinity;
  std::string quantization;  // "w8a8" re-quantizes float weights at load; "ascend" or "": as stored
  std::vector<std::string> ignored_flags;  // accepted for vLLM compatibility, no effect
};

// InvalidArgument naming `flag` unless `value` is empty or a JSON object.
Status ValidateJsonObjectFlag(std::string_view flag, const std::string& value);

// `json_text` with the values of secret-looking keys ("auth_token", "api_key",
// "password", "secret", "token", at any depth) replaced by "***", for logs. Text that is
// not JSON comes back as "<not JSON>".
std::string RedactSecrets(const std::string& json_text);

// The top-level keys of a JSON object flag (for "ignored keys" logs); empty if not one.
std::vector<std::string> JsonObjectKeys(const std::string& value);

// The keys of --additional-config that have no effect here (all but
// recompute_scheduler_enable), for the start-up log line.
std::vector<std::string> AdditionalConfigIgnoredKeys(const std::string& additional_config);

// The HTTP listener's options (--host, --port and the request limits). InvalidArgument
// naming the flag for a bad size or count.
StatusOr<net::HttpServerOptions> MakeHttpOptions(const ServeConfig& config);

// Engine options from the flags. InvalidArgument naming the flag (or, for
// --kv-transfer-config, the JSON field path) for bad values. With a transfer connector,
// kv_transfer.advertise_host is left empty when only the system can tell (wildcard
// --host and no kv_ip): the caller fills it in.
StatusOr<EngineOptions> MakeEngineOptions(const ServeConfig& config,
                                          const std::vector<int>& cpu_ids);

// The KV event publisher's options from --kv-events-config (net/kv_events_config.h), with
// the endpoints' ports offset by --data-parallel-rank as vLLM does; nullopt when no events
// are published (no flag, enable_kv_cache_events false, or publisher "null").
// InvalidArgument naming the problem for a bad config.
StatusOr<std::optional<net::KvEventPublisherOptions>> MakeKvEventPublisherOptions(
    const ServeConfig& config);

}  // namespace tandem::server
