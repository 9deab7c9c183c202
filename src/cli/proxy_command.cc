// `tandem proxy`: the OpenAI entry point of a PD-disaggregated cluster, with the flags of
// vllm-ascend's load_balance_proxy_server_example.py (a deployment's proxy.sh runs with
// `python load_balance_proxy_server_example.py` replaced by `tandem proxy`), plus
// --api-key. Parses flags and wires ProxyServer; the logic lives in src/proxy.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <tuple>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "common/byte_size.h"
#include "common/logging.h"
#include "proxy/proxy_server.h"

namespace tandem::cli {
namespace {

struct ProxyFlags {
  proxy::ProxyOptions options;
  std::vector<std::string> prefiller_hosts{"localhost"};
  std::vector<int> prefiller_ports{8001};
  std::vector<std::string> decoder_hosts{"localhost"};
  std::vector<int> decoder_ports{8002};
  std::string max_body_bytes = "64MiB";
  std::string max_header_bytes = "64KiB";
  double health_check_interval_s = 1.0;
  double backend_idle_timeout_s = 600;
  std::vector<std::string> worker_urls;
  std::string routing_policy = "least_load";
  std::vector<std::string> kv_events_endpoints;
  double kv_events_timeout_s = 30;
  int workers = 1;
  std::string log_level = "INFO";
};

int RunProxy(ProxyFlags flags) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts

  // The same variable as `tandem serve`'s, so one exported key guards a whole cluster
  // (and stays off the command line, where `ps` shows it).
  if (const char* env = std::getenv("VLLM_API_KEY");
      flags.options.api_key.empty() && env != nullptr) {
    flags.options.api_key = env;
  }
  if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) {
    flags.options.backend_api_key = env;
  }
  auto proxy = proxy::ProxyServer::Create(flags.options);
  if (!proxy.ok()) return ReportError(proxy.status());
  if (Status s = (*proxy)->Start(); !s.ok()) return ReportError(s);

  int sig = 0;
  sigwait(&set, &sig);
  TANDEM_LOG(INFO) << "received signal " << sig << "; shutting down";
  (*proxy)->Stop();
  TANDEM_LOG(INFO) << "shutdown complete";
  return 0;
}

}  // namespace

void RegisterProxy(CLI::App& app, RunFn* run) {
  auto flags = std::make_shared<ProxyFlags>();
  ProxyFlags& f = *flags;
  proxy::ProxyOptions& o = f.options;
  CLI::App* cmd = app.add_subcommand(
      "proxy", "PD load-balancing proxy (load_balance_proxy_server_example's flags)");
  cmd->add_option("--host", o.host, "bind address")->capture_default_str();
  cmd->add_option("--port", o.port, "port")->check(CLI::Range(1, 65535))->capture_default_str();
  cmd->add_option("--prefiller-hosts", f.prefiller_hosts, "prefill instance hosts")
      ->expected(1, -1)
      ->capture_default_str();
  cmd->add_option("--prefiller-ports", f.prefiller_ports, "prefill instance ports (one per host)")
      ->expected(1, -1)
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_option("--decoder-hosts", f.decoder_hosts, "decode instance hosts")
      ->expected(1, -1)
      ->capture_default_str();
  cmd->add_option("--decoder-ports", f.decoder_ports, "decode instance ports (one per host)")
      ->expected(1, -1)
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_option("--worker-urls", f.worker_urls,
                  "instances that do both phases (vllm-router's flag), e.g. http://host:8001: "
                  "requests go unchanged to one of them, without PD (replaces the prefiller "
                  "and decoder flags)")
      ->expected(1, -1);
  cmd->add_option("--routing-policy", f.routing_policy,
                  "how the prefiller (PD) or worker is picked: round_robin, least_load or "
                  "prefix_aware (the longest cached prefix, from the KV events, unless that "
                  "instance is too busy)")
      ->check(CLI::IsMember({"round_robin", "least_load", "prefix_aware"}))
      ->capture_default_str();
  cmd->add_option("--kv-events-endpoints", f.kv_events_endpoints,
                  "the KV-event publisher (ZMQ) of each prefiller, or of each worker with "
                  "--worker-urls, in the same order, e.g. tcp://127.0.0.1:5557; '' for one "
                  "without")
      ->expected(1, -1);
  cmd->add_option("--kv-events-replay-endpoints", o.kv_events_replay_endpoints,
                  "the publishers' replay (ROUTER) endpoints, aligned with --kv-events-endpoints "
                  "('' for one without): missed batches are fetched there before an instance's "
                  "index entries are dropped")
      ->expected(1, -1);
  cmd->add_option("--kv-events-topic", o.kv_events_topic,
                  "topic prefix to subscribe to ('' = all)");
  cmd->add_option("--prefix-load-threshold", o.prefix_load_threshold,
                  "prefix_aware: requests the prefix holder may have in flight beyond the least "
                  "busy instance before the request is routed by load")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--kv-events-timeout", f.kv_events_timeout_s,
                  "seconds an instance may stay silent after it was sent work that stores "
                  "blocks before its prefix-index entries are dropped")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  cmd->add_option("--max-retries", o.max_retries, "attempts per phase on transport errors / 5xx")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--retry-delay", o.retry_delay_s,
                  "base delay (seconds) of the exponential back-off between attempts")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--max-waiting-retries", o.max_waiting_retries,
                  "probes of an instance added at run time before it is given up")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--waiting-retry-interval", o.waiting_retry_interval_s,
                  "seconds between those probes")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--health-check-interval", f.health_check_interval_s,
                  "seconds between GET /health probes of a down instance")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  cmd->add_option("--backend-idle-timeout", f.backend_idle_timeout_s,
                  "seconds a backend may stay silent (no byte of its answer) before the request "
                  "fails over or ends with an error")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  cmd->add_option("--workers", f.workers,
                  "accepted for compatibility: I/O threads (one process serves everything)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--log-level", f.log_level, "DEBUG, INFO, WARNING, ERROR or CRITICAL")
      ->transform(
          CLI::IsMember({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, CLI::ignore_case))
      ->capture_default_str();
  cmd->add_option("--api-key", o.api_key,
                  "require 'Authorization: Bearer KEY' from clients on every route; sent to the "
                  "backends (default: $VLLM_API_KEY)");
  cmd->add_flag("--no-auth-health-metrics", o.no_auth_health_metrics,
                "with --api-key: leave /health, /healthcheck and /metrics open");
  cmd->add_option("--max-body-bytes", f.max_body_bytes,
                  "request bodies over this get 413 (e.g. 64MiB)")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", f.max_header_bytes,
                  "request line and headers over this get 431 (e.g. 64KiB)")
      ->capture_default_str();
  cmd->add_option("--max-connections", o.max_connections, "open client connections; more get 503")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->callback([flags, run, cmd_ = cmd] {
    ProxyFlags& f = *flags;
    auto prefillers = proxy::PairAddresses("prefiller", f.prefiller_hosts, f.prefiller_ports);
    if (!prefillers.ok()) throw CLI::ValidationError("proxy", prefillers.status().message());
    auto decoders = proxy::PairAddresses("decoder", f.decoder_hosts, f.decoder_ports);
    if (!decoders.ok()) throw CLI::ValidationError("proxy", decoders.status().message());
    for (auto [flag, text, bytes] :
         {std::tuple{"--max-body-bytes", &f.max_body_bytes, &f.options.max_body_bytes},
          std::tuple{"--max-header-bytes", &f.max_header_bytes, &f.options.max_header_bytes}}) {
      StatusOr<int64_t> size = ParseByteSize(*text);
      if (!size.ok()) throw CLI::ValidationError(flag, size.status().message());
      *bytes = static_cast<size_t>(*size);
    }
    if (!f.worker_urls.empty()) {
      for (const char* flag :
           {"--prefiller-hosts", "--prefiller-ports", "--decoder-hosts", "--decoder-ports"}) {
        if (cmd_->count(flag) > 0) {
          throw CLI::ValidationError("--worker-urls",
                                     std::string("cannot be combined with ") + flag);
        }
      }
      for (const std::string& url : f.worker_urls) {
        StatusOr<proxy::BackendAddress> address = proxy::ParseWorkerUrl(url);
        if (!address.ok()) throw CLI::ValidationError("--worker-urls", address.status().message());
        f.options.workers.push_back(std::move(*address));
      }
    } else {
      f.options.prefillers = std::move(*prefillers);
      f.options.decoders = std::move(*decoders);
    }
    f.options.routing_policy = *proxy::ParseRoutingPolicy(f.routing_policy);
    f.options.kv_events_endpoints = f.kv_events_endpoints;
    f.options.kv_events_silence_timeout =
        std::chrono::milliseconds(std::llround(f.kv_events_timeout_s * 1000));
    if (Status s = proxy::ValidateProxyOptions(f.options); !s.ok()) {
      throw CLI::ValidationError("proxy", s.message());
    }
    f.options.health_check_interval = std::chrono::milliseconds(
        std::max<int64_t>(10, std::llround(f.health_check_interval_s * 1000)));
    f.options.backend_idle_timeout = std::chrono::milliseconds(std::llround(f.backend_idle_timeout_s * 1000));
    f.options.io_threads = std::max(2, f.workers);
    std::string level = f.log_level;
    std::transform(level.begin(), level.end(), level.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    SetMinLogLevel(level == "DEBUG"     ? LogLevel::kDebug
                   : level == "INFO"    ? LogLevel::kInfo
                   : level == "WARNING" ? LogLevel::kWarning
                                        : LogLevel::kError);
    *run = [flags] { return RunProxy(*flags); };
  });
}

}  // namespace tandem::cli
