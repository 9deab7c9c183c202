// `tandem bench serve`: load generator and latency report for an OpenAI-compatible
// endpoint, with `vllm bench serve`'s flags and figures (ops/bench_*.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "net/http_client.h"
#include "net/url.h"
#include "ops/bench_report.h"
#include "ops/bench_runner.h"
#include "ops/bench_stats.h"
#include "ops/bench_workload.h"
#include "ops/metrics_scrape.h"

namespace tandem::cli {
namespace {

struct BenchFlags {
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint;  // default by workload
  std::string model;
  std::string api_key;
  std::string workload = "random";
  ops::WorkloadOptions w;
  int prefix_len = -1;  // -1: 512 for shared-prefix, 0 otherwise
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int max_concurrency = 0;
  double temperature = 0;
  bool ignore_eos = false;
  std::vector<std::string> goodput;
  std::vector<std::string> metrics_urls;
  std::string tokenizer_url;
  std::string result_file;
  bool disable_progress = false;
  double request_timeout_s = 600;
  double think_time_s = 0;
};

std::string DateStamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &local);
  return buf;
}

int RunBenchServe(BenchFlags f) {
  auto kind = ops::ParseWorkloadKind(f.workload);
  if (!kind.ok()) return ReportError(kind.status());
  auto slos = ops::ParseGoodputSlos(f.goodput);
  if (!slos.ok()) return ReportError(slos.status());

  ops::BenchRunOptions o;
  std::string base_url = f.base_url;
  if (base_url.empty()) base_url = "http://" + f.host + ":" + std::to_string(f.port);
  auto url = net::ParseHttpUrl(base_url);
  if (!url.ok()) return ReportError(url.status().WithContext("--base-url"));
  o.target.host = url->host;
  o.target.port = url->port;
  base_url = "http://" + url->HostPort();
  o.target.endpoint = !f.endpoint.empty()                      ? f.endpoint
                      : *kind == ops::WorkloadKind::kMultiTurn ? "/v1/chat/completions"
                                                               : "/v1/completions";
  if (*kind == ops::WorkloadKind::kMultiTurn && !ops::IsChatEndpoint(o.target.endpoint)) {
    return ReportError(InvalidArgumentError("the multi-turn workload needs a chat endpoint"));
  }
  o.target.api_key = f.api_key;
  if (o.target.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) o.target.api_key = env;
  }
  o.target.model = f.model;
  if (o.target.model.empty()) {
    auto model = ops::FirstServedModel(o.target);
    if (!model.ok()) return ReportError(model.status().WithContext("--model not given"));
    o.target.model = *model;
  }
  o.request_rate = f.request_rate;
  o.burstiness = f.burstiness;
  o.max_concurrency = f.max_concurrency;
  o.temperature = f.temperature;
  o.ignore_eos = f.ignore_eos;
  o.seed = f.w.seed;
  o.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout_s * 1000));
  o.think_time_s = f.think_time_s;

  ops::WorkloadOptions w = f.w;
  w.kind = *kind;
  w.prefix_len = f.prefix_len >= 0                           ? f.prefix_len
                 : *kind == ops::WorkloadKind::kSharedPrefix ? 512
                                                             : 0;
  ops::BenchTarget tokenizer = o.target;
  if (!f.tokenizer_url.empty()) {
    auto t = net::ParseHttpUrl(f.tokenizer_url);
    if (!t.ok()) return ReportError(t.status().WithContext("--tokenizer-url"));
    tokenizer.host = t->host;
    tokenizer.port = t->port;
  }
  if (auto ratio = ops::MeasureTokensPerWord(tokenizer); ratio.ok()) {
    w.tokens_per_word = *ratio;
  } else {
    std::cerr << "note: " << ratio.status().ToString()
              << "; assuming one token per word for the prompt lengths\n";
  }
  auto sessions = ops::BuildWorkload(w);
  if (!sessions.ok()) return ReportError(sessions.status());

  std::vector<ops::MetricsEndpoint> metrics;
  for (const std::string& m :
       f.metrics_urls.empty() ? std::vector<std::string>{base_url} : f.metrics_urls) {
    auto endpoint = ops::ParseMetricsEndpoint(m);
    if (!endpoint.ok()) return ReportError(endpoint.status().WithContext("--metrics-url"));
    endpoint->api_key = o.target.api_key;  // keyed engines guard /metrics too
    metrics.push_back(*endpoint);
  }
  net::HttpClient scrape_client;
  const auto scrape_timeout = std::chrono::seconds(10);
  auto before = ops::ScrapePrefixCacheCounters(scrape_client, metrics, scrape_timeout);

  std::cerr << "tandem bench serve: " << w.num_prompts << " requests (" << f.workload << ") to "
            << base_url << o.target.endpoint << ", model " << o.target.model << ", rate "
            << (std::isfinite(o.request_rate) ? std::to_string(o.request_rate) : "inf")
            << ", max concurrency "
            << (o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "none") << "\n";
  const auto start = std::chrono::steady_clock::now();
  const bool progress = !f.disable_progress;
  const bool tty = isatty(STDERR_FILENO);
  o.on_progress = [&](int done, int total) {
    if (!progress) return;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A terminal gets one redrawn line; a log file gets a line per tenth of the run.
    if (tty) {
      std::cerr << "\r" << ops::FormatProgress(done, total, elapsed) << (done == total ? "\n" : "")
                << std::flush;
    } else if (done == total || (done > 0 && total >= 10 && done % (total / 10) == 0)) {
      std::cerr << ops::FormatProgress(done, total, elapsed) << "\n";
    }
  };
  std::vector<double> arrivals =
      ops::ArrivalTimes(static_cast<int>(sessions->size()), o.request_rate, o.burstiness, o.seed);

  ops::BenchReport report;
  report.run = ops::RunBenchmark(o, *sessions, arrivals);
  auto after = ops::ScrapePrefixCacheCounters(scrape_client, metrics, scrape_timeout);
  if (before.ok() && after.ok()) {
    report.cache_increase = ops::CounterIncrease(*before, *after);
  } else {
    std::cerr << "note: no prefix-cache figures: "
              << (before.ok() ? after.status() : before.status()).ToString() << "\n";
  }
  report.date = DateStamp();
  report.base_url = base_url;
  report.run_options = o;
  report.run_options.on_progress = nullptr;
  report.workload = w;
  report.slos = *slos;
  report.metrics =
      ops::ComputeBenchMetrics(report.run.results, std::max(report.run.duration_s, 1e-9), *slos);
  std::cout << ops::FormatBenchReport(report) << std::flush;
  for (const ops::RequestResult& r : report.run.results) {
    if (!r.success) {
      std::cerr << "first error: " << r.error << "\n";
      break;
    }
  }
  if (!f.result_file.empty()) {
    std::ofstream out(f.result_file);
    out << ops::BenchReportJson(report) << "\n";
    if (!out) return ReportError(InternalError("cannot write " + f.result_file));
  }
  return report.metrics.completed > 0 ? 0 : 1;
}

}  // namespace

void RegisterBench(CLI::App& app, RunFn* run) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  RegisterBenchModel(*bench, run);
  CLI::App* cmd = bench->add_subcommand(
      "serve", "load an OpenAI-compatible server and report TTFT/TPOT/ITL/E2EL (vllm bench serve)");
  BenchFlags& f = *flags;
  cmd->add_option("--base-url", f.base_url, "server URL, e.g. http://127.0.0.1:8000");
  cmd->add_option("--host", f.host, "server host (without --base-url)")->capture_default_str();
  cmd->add_option("--port", f.port, "server port (without --base-url)")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_option("--endpoint", f.endpoint,
                  "/v1/completions (default) or /v1/chat/completions (multi-turn's default)");
  cmd->add_option("--model", f.model, "model name (default: the first of /v1/models)");
  cmd->add_option("--api-key", f.api_key, "bearer token (default: $OPENAI_API_KEY)");
  cmd->add_option("--workload,--dataset-name", f.workload, "random, shared-prefix, multi-turn, quote")
      ->capture_default_str();
  cmd->add_option("--num-prompts", f.w.num_prompts, "requests in total")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--input-len,--random-input-len", f.w.input_len,
                  "tokens of each request's own text (a user turn)")
      ->capture_default_str();
  cmd->add_option("--output-len,--random-output-len", f.w.output_len, "max_tokens per request")
      ->capture_default_str();
  cmd->add_option("--range-ratio,--random-range-ratio", f.w.range_ratio,
                  "lengths vary uniformly within +-ratio")
      ->capture_default_str();
  cmd->add_option("--prefix-len,--shared-prefix-len", f.prefix_len,
                  "tokens of the shared system prompt (default 512 for shared-prefix, else 0)");
  cmd->add_option("--num-prefixes", f.w.num_prefixes, "shared-prefix groups")
      ->capture_default_str();
  cmd->add_option("--think-time", f.think_time_s,
                  "multi-turn: seconds between a reply and the session's next turn")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--num-turns", f.w.num_turns, "user turns per multi-turn session")
      ->capture_default_str();
  cmd->add_option("--request-rate", f.request_rate,
                  "sessions per second, Poisson arrivals (default inf: all at once)");
  cmd->add_option("--burstiness", f.burstiness, "gamma shape of the gaps (1: Poisson)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-concurrency", f.max_concurrency, "requests in flight (0: unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", f.w.seed, "seed of prompts and arrivals")->capture_default_str();
  cmd->add_option("--temperature", f.temperature, "sampling temperature")->capture_default_str();
  cmd->add_flag("--ignore-eos", f.ignore_eos, "generate max_tokens whatever the model says");
  cmd->add_option("--goodput", f.goodput, "SLOs in ms: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--tokenizer-url", f.tokenizer_url,
                  "server whose /tokenize calibrates prompt lengths (default: the target; a proxy has none)");
  cmd->add_option("--metrics-url", f.metrics_urls,
                  "/metrics to read prefix-cache counters from (repeatable; default: the server)");
  cmd->add_option("--result-file", f.result_file, "write the results as JSON to FILE");
  cmd->add_flag("--disable-progress,--disable-tqdm", f.disable_progress, "no progress bar");
  cmd->add_option("--request-timeout", f.request_timeout_s, "seconds per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([flags, run] { *run = [flags] { return RunBenchServe(*flags); }; });
}

}  // namespace tandem::cli
