// `tandem serve [MODEL.gguf]`: the OpenAI-compatible server for one engine, with vLLM's
// flags. Parses flags and wires model -> engine -> server; the rules live in
// src/server (serve_config.h), the serving in OpenAiServer. With vLLM's data-parallel
// flags (--data-parallel-size-local, --headless, or --data-parallel-size N > 1 without
// --data-parallel-rank) it becomes the supervisor of N ranks instead (src/dp).
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "dist/expert_parallel_group.h"
#include "dp/dp_layout.h"
#include "dp/dp_supervisor.h"
#include "engine/engine.h"
#include "kv/kv_events.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "net/host_address.h"
#include "net/kv_event_publisher.h"
#include "server/generation_defaults.h"
#include "server/openai_server.h"
#include "server/parsers/chat_output_parser.h"
#include "server/serve_config.h"

namespace tandem::cli {
namespace {

using server::ServeConfig;

// Flags that only mean something on Ascend/CUDA or in vLLM's process layout: accepted
// so vllm-ascend command lines (docs/DEPLOY.md) run unchanged, and logged once as ignored.
void AddIgnoredFlags(CLI::App* cmd, std::vector<CLI::Option*>* ignored) {
  for (const char* name : {"--enforce-eager", "--trust-remote-code", "--async-scheduling"}) {
    ignored->push_back(cmd->add_flag(std::string(name))->description("accepted; no effect on CPU"));
  }
  for (const char* name : {"--compilation-config", "--safetensors-load-strategy",
                           "--pipeline-parallel-size", "--prefill-context-parallel-size",
                           "--decode-context-parallel-size", "--cp-kv-cache-interleave-size"}) {
    // No bound variable: the value stays in the option's results() for the log line.
    ignored->push_back(
        cmd->add_option(name)->description("accepted; no effect on CPU")->expected(1));
  }
}

// TEST ONLY: the tokens of --scripted-output-file (no BOS/EOS added; special-token
// spellings such as <tool_call> become their tokens).
StatusOr<std::vector<int32_t>> ReadScriptedTokens(const std::string& path,
                                                  const Tokenizer& tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError("--scripted-output-file: cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<int32_t> tokens =
      tokenizer.Encode(text.str(), /*add_special=*/false, /*parse_special=*/true);
  if (tokens.empty()) return InvalidArgumentError("--scripted-output-file: " + path + " is empty");
  return tokens;
}

// Waits for SIGINT or SIGTERM (blocked in every thread; see RunServe).
int WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

int RunServe(ServeConfig config, const std::vector<CLI::Option*>& ignored) {
  // Block the shutdown signals before any thread starts, so they all inherit the mask
  // and only WaitForSignal receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{
                                        "--kv-transfer-config", &config.kv_transfer_config},
                                    {"--kv-events-config", &config.kv_events_config},
                                    {"--speculative-config", &config.speculative_config},
                                    {"--additional-config", &config.additional_config}}) {
    if (Status s = server::ValidateJsonObjectFlag(flag, *value); !s.ok()) return ReportError(s);
  }
  std::string ignored_text;
  for (const CLI::Option* opt : ignored) {
    if (opt->count() == 0) continue;
    ignored_text += (ignored_text.empty() ? "" : ", ") + opt->get_name();
    if (opt->get_items_expected_max() > 0 && !opt->results().empty())
      ignored_text += " " + opt->results().front();
  }
  if (const std::vector<std::string> keys = server::AdditionalConfigIgnoredKeys(config.additional_config);
      !keys.empty()) {
    std::string list;
    for (const std::string& k : keys) list += (list.empty() ? "" : " ") + k;
    ignored_text += (ignored_text.empty() ? "" : ", ") + std::string("--additional-config keys (Ascend-only) ") + list;
  }
  if (!ignored_text.empty())
    TANDEM_LOG(INFO) << "ignored on CPU (accepted for vLLM compatibility): " << ignored_text;
  if (config.api_key.empty()) {
    if (const char* env = std::getenv("VLLM_API_KEY"); env != nullptr) config.api_key = env;
  }

  ModelFlags model_flags{config.model, config.threads, config.cpu_affinity, config.quantization, {}};
  auto path = ResolveModelPath(config.model);
  if (!path.ok()) return ReportError(path.status());
  config.model = *path;
  model_flags.model = *path;
  if (config.served_model_names.empty()) config.served_model_names.push_back(config.model);
  std::vector<int> cpu_ids;
  if (!config.cpu_affinity.empty()) {
    auto cpus = ParseCpuList(config.cpu_affinity);
    if (!cpus.ok()) return ReportError(cpus.status());
    cpu_ids = *cpus;
  }
  if (const char* cap = std::getenv("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"); cap != nullptr && *cap != '\0') {
    char* end = nullptr;
    const double v = std::strtod(cap, &end);
    if (end == cap || *end != '\0' || !(v > 0)) {
      return ReportError(InvalidArgumentError("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT must be a positive number of seconds"));
    }
    config.kv_lease_cap_s = v;
  }
  if (auto http = server::MakeHttpOptions(config); !http.ok()) return ReportError(http.status());
  auto engine_options = server::MakeEngineOptions(config, cpu_ids);
  if (!engine_options.ok()) return ReportError(engine_options.status());
  if (const char* delay = std::getenv("TANDEM_FAULT_ENGINE_STEP_DELAY_MS"); delay != nullptr) {
    engine_options->fault_step_delay_ms = std::atoi(delay);  // TEST ONLY: a stuck step loop
    TANDEM_LOG(WARNING) << "TEST ONLY: every engine step is delayed by "
                        << engine_options->fault_step_delay_ms << " ms";
  }
  KvTransferOptions& kv = engine_options->kv_transfer;
  // Where decode instances reach this producer's transfer server, when neither kv_ip nor
  // a specific --host says.
  if ((kv.producer || kv.consumer) && kv.advertise_host.empty()) kv.advertise_host = net::DefaultAdvertiseAddress();
  if (const char* token = std::getenv("TANDEM_KV_AUTH_TOKEN"); kv.auth_token.empty() && token != nullptr) {
    kv.auth_token = token;  // kept off the command line, where `ps` shows it
  }
  if (engine_options->pool.enabled) {
    const char* worker = std::getenv("DS_WORKER_ADDR");
    if (worker == nullptr || *worker == '\0') {
      TANDEM_LOG(WARNING) << "--kv-transfer-config has a pool connector but DS_WORKER_ADDR is not set; "
                             "running without the KV pool";
      engine_options->pool.enabled = false;
    } else {
      engine_options->pool.worker_address = worker;
    }
  }
  if (kv.producer || kv.consumer) {
    TANDEM_LOG(INFO) << "KV transfer: " << (kv.producer && kv.consumer ? "producer and consumer"
                                            : kv.producer               ? "producer"
                                                                        : "consumer")
                     << (kv.producer ? ", transfer server " + kv.bind_host + ":" + std::to_string(kv.port) +
                                           " advertised as " + kv.advertise_host
                                     : std::string())
                     << ", engine_id " << kv.engine_id << ", load failure policy "
                     << (kv.recompute_on_failure ? "recompute" : "fail");
  }
  // Expert parallelism spans the data-parallel ranks (tensor parallelism is one CPU shard).
  const bool expert_parallel = config.enable_expert_parallel && config.data_parallel_size > 1;
  if (config.tensor_parallel_size > 1 || config.data_parallel_size > 1 ||
      config.enable_expert_parallel) {
    TANDEM_LOG(INFO) << "parallelism: data-parallel rank " << config.data_parallel_rank << " of "
                     << config.data_parallel_size << " (address " << config.data_parallel_address
                     << ":" << config.data_parallel_rpc_port << "); tensor-parallel "
                     << config.tensor_parallel_size << " runs as one CPU shard; expert-parallel "
                     << (expert_parallel ? "over the " + std::to_string(config.data_parallel_size) + " ranks"
                         : config.enable_expert_parallel ? "on one rank (it holds every expert)"
                                                         : "off");
  }
  if (!config.kv_transfer_config.empty())
    TANDEM_LOG(INFO) << "kv-transfer-config: " << server::RedactSecrets(config.kv_transfer_config);
  if (!config.speculative_config.empty())
    TANDEM_LOG(INFO) << "speculative-config: " << server::RedactSecrets(config.speculative_config);
  // Unknown parser names fail here, at start-up, rather than on every request.
  if (auto check = parsers::ChatOutputParser::Create(
          {config.tool_call_parser, config.reasoning_parser, true, ""});
      !check.ok()) {
    return ReportError(check.status());
  }
  if (!config.tool_call_parser.empty() || !config.reasoning_parser.empty()) {
    TANDEM_LOG(INFO) << "tool-call-parser '" << config.tool_call_parser << "', reasoning-parser '"
                     << config.reasoning_parser << "', auto tool choice "
                     << (config.enable_auto_tool_choice ? "on" : "off");
  }

  // KV events: the sockets bind before the model loads, so a bad endpoint fails fast.
  MetricsRegistry metrics;
  auto kv_events = server::MakeKvEventPublisherOptions(config);
  if (!kv_events.ok()) return ReportError(kv_events.status());
  std::unique_ptr<net::KvEventPublisher> kv_event_publisher;
  std::unique_ptr<kv::KvEventBatcher> kv_event_batcher;
  if (kv_events->has_value()) {
    net::KvEventPublisherOptions& o = **kv_events;
    if (const char* delay = std::getenv("TANDEM_FAULT_KV_EVENTS_SEND_DELAY_MS"); delay != nullptr) {
      o.fault_send_delay_ms = std::atoi(delay);  // TEST ONLY: a stalled network
      TANDEM_LOG(WARNING) << "TEST ONLY: KV event sends are delayed by " << o.fault_send_delay_ms << " ms";
    }
    auto publisher = net::KvEventPublisher::Create(o, &metrics);
    if (!publisher.ok()) return ReportError(publisher.status());
    kv_event_publisher = std::move(*publisher);
    kv_event_batcher = std::make_unique<kv::KvEventBatcher>(
        config.data_parallel_rank, [p = kv_event_publisher.get()](std::string payload, size_t n) {
          p->Publish(std::move(payload), n);
        });
    engine_options->kv_event_sink = kv_event_batcher.get();
    if (!engine_options->enable_prefix_caching) {
      TANDEM_LOG(WARNING) << "--kv-events-config: prefix caching is off, so no block is ever cached "
                             "and only AllBlocksCleared is published";
    }
  }

  if (expert_parallel) model_flags.expert_shard = {config.data_parallel_rank, config.data_parallel_size};
  auto model = LoadModelFromFlags(model_flags);
  if (!model.ok()) return ReportError(model.status());
  if (config.enable_expert_parallel && (*model)->config().moe.n_expert == 0) {
    return ReportError(InvalidArgumentError("--enable-expert-parallel: " + (*model)->config().arch +
                                            " is a dense model (no MoE layers, no experts to spread over ranks)"));
  }
  std::unique_ptr<dist::ExpertParallelGroup> expert_group;  // outlives the engine
  if (expert_parallel) {
    const int n_expert = (*model)->config().moe.n_expert;
    const ExpertShard& shard = model_flags.expert_shard;
    dist::ExpertParallelOptions o;
    o.rank = config.data_parallel_rank;
    o.size = config.data_parallel_size;
    if (!config.data_parallel_address.empty()) o.address = config.data_parallel_address;
    o.store_port = static_cast<uint16_t>(
        (config.data_parallel_rpc_port > 0 ? config.data_parallel_rpc_port : server::kDefaultDataParallelRpcPort) + 1);
    o.join_timeout = o.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.expert_parallel_timeout_s * 1000));
    TANDEM_LOG(INFO) << "expert parallel: this rank holds experts [" << shard.First(n_expert) << ", "
                     << shard.First(n_expert) + shard.Count(n_expert) << ") of " << n_expert
                     << " in every MoE layer (NextN blocks keep all theirs)";
    auto group = dist::ExpertParallelGroup::Join(o);
    if (!group.ok()) return ReportError(group.status());
    expert_group = std::move(group).value();
    engine_options->expert_exchange = expert_group.get();
  }
  // The model part of every prefix-cache key (kv/block_hash.h): with kv_hash_tool, anyone can
  // recompute the block hashes that KV events and pool keys carry.
  TANDEM_LOG(INFO) << "model fingerprint " << (*model)->fingerprint();
  auto engine = Engine::Create(**model, *engine_options, &metrics);
  if (!engine.ok()) return ReportError(engine.status());
  const EngineSnapshot snap = (*engine)->Snapshot();
  TANDEM_LOG(INFO) << "KV cache: " << snap.num_kv_blocks << " blocks, max "
                   << snap.max_tokens_in_cache << " tokens fit; max-model-len "
                   << (*engine)->options().max_model_len;

  server::ServerOptions options;
  auto http = server::MakeHttpOptions(config);
  if (!http.ok()) return ReportError(http.status());
  options.http = *http;
  options.served_model_names = config.served_model_names;
  options.model_path = config.model;
  options.max_model_len = (*engine)->options().max_model_len;
  options.api_key = config.api_key;
  options.no_auth_health_metrics = config.no_auth_health_metrics;
  options.enable_prompt_tokens_details = config.enable_prompt_tokens_details;
  options.seed = config.seed;
  options.enable_auto_tool_choice = config.enable_auto_tool_choice;
  options.tool_call_parser = config.tool_call_parser;
  options.reasoning_parser = config.reasoning_parser;
  auto defaults = server::LoadGenerationDefaults(config.generation_config, (*model)->source().path(),
                                                 config.override_generation_config);
  if (!defaults.ok()) return ReportError(defaults.status());
  if (!defaults->empty()) {
    // vLLM's notice, so a user sees why a request without temperature is not sampled at 1.
    TANDEM_LOG(INFO) << "default sampling parameters overridden by the generation config ("
                     << config.generation_config << "): " << server::DescribeGenerationDefaults(*defaults)
                     << "; --generation-config vllm to use OpenAI's defaults";
  }
  options.generation_defaults = *defaults;
  if (!config.scripted_output_file.empty()) {
    auto scripted = ReadScriptedTokens(config.scripted_output_file, (*model)->tokenizer());
    if (!scripted.ok()) return ReportError(scripted.status());
    TANDEM_LOG(WARNING) << "TEST ONLY: every request generates the " << scripted->size()
                        << " tokens of " << config.scripted_output_file;
    options.scripted_tokens = std::move(*scripted);
  }
  auto server = server::OpenAiServer::Create(options, **model, **engine, &metrics);
  if (!server.ok()) return ReportError(server.status());
  if (Status s = (*server)->Start(); !s.ok()) return ReportError(s);

  int sig = WaitForSignal();
  TANDEM_LOG(INFO) << "received signal " << sig << "; shutting down";
  (*server)->Stop();  // no new requests; in-flight responses get the grace period
  (*engine)->Shutdown();
  TANDEM_LOG(INFO) << "shutdown complete";
  return 0;
}

// This process's `tandem serve` arguments (after "serve"), as the user gave them, from
// /proc/self/cmdline: the ranks get them unchanged (less the supervisor's flags).
std::vector<std::string> ServeArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> all;
  for (std::string arg; std::getline(in, arg, '\0');) all.push_back(arg);
  auto serve = std::find(all.begin(), all.end(), "serve");
  if (serve == all.end()) return {};
  return std::vector<std::string>(serve + 1, all.end());
}

// The supervisor of DpMode::kFrontEnd / kHeadless (dp/dp_supervisor.h).
int RunDataParallelServe(ServeConfig config, const dp::DpFlags& flags) {
  std::vector<int> cpu_ids;
  if (!config.cpu_affinity.empty()) {
    auto cpus = ParseCpuList(config.cpu_affinity);
    if (!cpus.ok()) return ReportError(cpus.status());
    cpu_ids = *cpus;
  }
  dp::DpFlags f = flags;
  f.cpu_ids = cpu_ids;
  auto cores = ThreadCount(ModelFlags{config.model, 0, "", "", {}});
  if (!cores.ok()) return ReportError(cores.status());
  auto plan = dp::PlanDp(f, *cores);
  if (!plan.ok()) return ReportError(plan.status());
  auto http = server::MakeHttpOptions(config);
  if (!http.ok()) return ReportError(http.status());
  if (config.api_key.empty()) {
    if (const char* env = std::getenv("VLLM_API_KEY"); env != nullptr) config.api_key = env;
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return ReportError(InternalError("cannot read /proc/self/exe: " + ec.message()));

  dp::DpRunOptions o;
  o.plan = *plan;
  o.exe = exe.string();
  o.user_args = dp::StripSupervisorFlags(ServeArguments());
  o.rank_host = config.host;
  const bool wildcard = config.host.empty() || config.host == "0.0.0.0" || config.host == "::";
  o.advertise_host = wildcard ? net::DefaultAdvertiseAddress() : config.host;
  o.api_key = config.api_key;
  const double join_timeout_s = flags.join_timeout_s >= 0 ? flags.join_timeout_s : 300;
  o.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(join_timeout_s * 1000));
  proxy::ProxyOptions& p = o.front_end;
  p.host = config.host;
  p.port = static_cast<uint16_t>(config.port);
  p.api_key = config.api_key;
  p.no_auth_health_metrics = config.no_auth_health_metrics;
  p.max_body_bytes = http->max_body_bytes;
  p.max_header_bytes = http->max_header_bytes;
  p.max_connections = http->max_connections;
  // --api-server-count K: K front-end I/O threads (at least 2) sharing the port in this
  // one process.
  p.io_threads = std::max(2, flags.api_server_count);
  std::string ranks;
  for (const dp::RankSlot& r : plan->ranks) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r.rank) + "@" + std::to_string(r.port) +
             " (" + std::to_string(r.threads) + " threads" +
             (r.cpus.empty() ? std::string()
                             : ", cores " + std::to_string(r.cpus.front()) + "-" +
                                   std::to_string(r.cpus.back())) +
             ")";
  }
  TANDEM_LOG(INFO) << (plan->mode == dp::DpMode::kHeadless ? "headless data-parallel node"
                                                           : "data-parallel front end")
                   << ": " << plan->ranks.size() << " of " << plan->size << " ranks here: " << ranks
                   << "; DP address " << plan->address << ":" << plan->rpc_port;
  return dp::RunDataParallel(o);
}

}  // namespace

void RegisterServe(CLI::App& app, RunFn* run) {
  auto config = std::make_shared<ServeConfig>();
  auto ignored = std::make_shared<std::vector<CLI::Option*>>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible server (vLLM's flags)");
  ServeConfig& c = *config;
  cmd->add_option("model,--model", c.model,
                  "GGUF file or Hugging Face checkpoint directory (default: $TANDEM_MODEL, then the default model)");
  cmd->add_option("--host", c.host, "bind address (0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", c.port, "port")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--served-model-name", c.served_model_names,
                  "model name(s) in the API (default: the model path)");
  cmd->add_option("--generation-config", c.generation_config,
                  "sampling defaults: auto (the checkpoint's generation_config.json), vllm (none), or a folder")
      ->capture_default_str();
  cmd->add_option("--override-generation-config", c.override_generation_config,
                  "JSON object overriding sampling defaults (temperature, top_p, top_k, min_p, "
                  "repetition_penalty, max_new_tokens)");
  cmd->add_option("--max-model-len,--max_model_len", c.max_model_len,
                  "context limit (default: the model's)");
  cmd->add_option("--max-num-seqs", c.max_num_seqs, "running sequences")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", c.max_num_batched_tokens, "tokens per step")
      ->capture_default_str();
  cmd->add_option("--max-waiting-requests", c.max_waiting_requests,
                  "queued requests beyond the running ones; more get 503")
      ->capture_default_str();
  cmd->add_option("--scheduling-policy", c.scheduling_policy,
                  "fcfs (arrival order) or priority (the request's `priority`, lower first)")
      ->capture_default_str();
  cmd->add_option(
         "--health-watchdog-s", c.health_watchdog_s,
         "/health answers 503 when work is queued and no engine step completed for this long")
      ->capture_default_str();
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", c.enable_chunked_prefill,
                "split long prompts over steps of --max-num-batched-tokens (default on; off: a "
                "prompt runs in one step, the budget must hold --max-model-len)");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching,
                "prefix caching (default on)");
  cmd->add_option("--block-size", c.block_size, "tokens per KV block")->capture_default_str();
  auto seed = std::make_shared<uint64_t>(0);
  CLI::Option* seed_opt = cmd->add_option("--seed", *seed, "seed for requests that bring none");
  cmd->add_option("--api-key", c.api_key,
                  "require 'Authorization: Bearer KEY' on every route (default: $VLLM_API_KEY)");
  cmd->add_flag("--no-auth-health-metrics", c.no_auth_health_metrics,
                "with --api-key: leave /health, /metrics and /version open");
  cmd->add_option("--max-body-bytes", c.max_body_bytes,
                  "request bodies over this get 413 (e.g. 32MiB)")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", c.max_header_bytes,
                  "request line and headers over this get 431 (e.g. 64KiB)")
      ->capture_default_str();
  cmd->add_option("--max-connections", c.max_connections, "open HTTP connections; more get 503")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_flag("--enable-prompt-tokens-details", c.enable_prompt_tokens_details,
                "report usage.prompt_tokens_details.cached_tokens");
  cmd->add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                  "fraction of --kv-cache-memory used")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", c.kv_cache_memory,
                  "KV cache budget, e.g. 4GiB, 512MiB, bytes")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", c.kv_cache_dtype,
                  "KV cache element type: auto (fp16), fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2")
      ->capture_default_str();
  auto dp_flags = std::make_shared<dp::DpFlags>();
  cmd->add_option("--data-parallel-size", c.data_parallel_size,
                  "data-parallel ranks over all nodes")
      ->check(CLI::Range(1, 4096));
  CLI::Option* dp_rank_opt =
      cmd->add_option("--data-parallel-rank", c.data_parallel_rank,
                      "run only this rank (balanced from outside; ports and engine id only)")
          ->check(CLI::Range(0, 4095));
  cmd->add_option("--data-parallel-address", c.data_parallel_address,
                  "the front end node's address (rank registration; default 127.0.0.1)");
  cmd->add_option("--data-parallel-rpc-port", c.data_parallel_rpc_port,
                  "the front end's rank registration port (default 29550; port + 1 is reserved)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--data-parallel-size-local", dp_flags->size_local,
                  "ranks on this node, supervised (default: --data-parallel-size)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--data-parallel-start-rank", dp_flags->start_rank,
                  "global rank of this node's first rank")
      ->check(CLI::Range(0, 4095));
  cmd->add_flag("--headless", dp_flags->headless,
                "run only this node's ranks and register them with the front end at "
                "--data-parallel-address:--data-parallel-rpc-port");
  cmd->add_option("--api-server-count", dp_flags->api_server_count,
                  "front-end I/O threads sharing --port (one process)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--data-parallel-join-timeout", dp_flags->join_timeout_s,
                  "--headless: seconds to wait for the front end before exiting 2 (default 300)");
  cmd->add_option("--tensor-parallel-size", c.tensor_parallel_size)->check(CLI::Range(1, 4096));
  cmd->add_flag("--enable-expert-parallel", c.enable_expert_parallel,
                "spread each MoE layer's experts over the data-parallel ranks (Gloo all-to-all)");
  cmd->add_option("--expert-parallel-timeout", c.expert_parallel_timeout_s,
                  "seconds to wait for the other expert-parallel ranks to join, and for one collective")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--kv-transfer-config", c.kv_transfer_config, "KV connector config (JSON)");
  cmd->add_option("--additional-config", c.additional_config,
                  "vLLM-Ascend options (JSON): recompute_scheduler_enable; other keys are Ascend-only, ignored");
  cmd->add_option("--kv-events-config", c.kv_events_config,
                  "KV cache events (JSON, vLLM's KVEventsConfig), e.g. "
                  "'{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\"}'");
  cmd->add_option("--speculative-config", c.speculative_config,
                  "speculative decoding config (JSON)");
  cmd->add_flag("--enable-auto-tool-choice", c.enable_auto_tool_choice);
  cmd->add_option("--tool-call-parser", c.tool_call_parser, "e.g. glm45, glm47, hermes");
  cmd->add_option("--reasoning-parser", c.reasoning_parser, "e.g. glm45, deepseek_r1");
  // TEST ONLY: an empty group hides the option from --help.
  cmd->add_option("--scripted-output-file", c.scripted_output_file,
                  "TEST ONLY: every request generates this file's text")
      ->group("");
  cmd->add_option("-t,--threads", c.threads, "compute threads (default: cores available)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--cpu-affinity", c.cpu_affinity,
                  "pin compute threads to these cores, e.g. 0,1 or 0-3");
  AddQuantizationFlag(*cmd, &c.quantization);
  AddIgnoredFlags(cmd, ignored.get());
  cmd->callback([config, ignored, seed, seed_opt, dp_flags, dp_rank_opt, run] {
    if (seed_opt->count() > 0) config->seed = *seed;
    dp::DpFlags& f = *dp_flags;
    f.size = config->data_parallel_size;
    f.rank = dp_rank_opt->count() > 0 ? config->data_parallel_rank : -1;
    f.address = config->data_parallel_address;
    f.rpc_port = config->data_parallel_rpc_port;
    f.host = config->host;
    f.port = config->port;
    f.threads = config->threads;
    if (dp::ChooseDpMode(f) != dp::DpMode::kSingle) {
      *run = [config, dp_flags] { return RunDataParallelServe(*config, *dp_flags); };
      return;
    }
    *run = [config, ignored, dp_flags] {
      // One engine: the DP flags, if any, must describe just this rank.
      if (auto plan = dp::PlanDp(*dp_flags, 1); !plan.ok()) return ReportError(plan.status());
      return RunServe(*config, *ignored);
    };
  });
}

}  // namespace tandem::cli
