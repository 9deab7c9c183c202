// `tandem bench model`: the engine's own throughput on one model, beside the machine's
// measured memory bandwidth and the decode roofline that bandwidth allows.
//
//   prompt_tokens_per_s          a --prompt-tokens prompt (default 512; no prefix cache), best
//                                of --repeat; one chunk unless --max-num-batched-tokens is
//                                smaller
//   decode_tokens_per_s          one stream, --gen tokens after a 16-token prompt
//   batched_decode_tokens_per_s  {"B": tokens/s} for B streams decoding together (each a
//                                --batch-prompt-tokens prompt, default 16, then
//                                --batch-gen-tokens, default --gen-tokens / 2): tokens
//                                generated while all B were past their first token,
//                                over that window (llama-batched-bench's S_TG)
//   memory_bandwidth_gb_s        read bandwidth of a buffer far larger than the caches,
//                                with --threads threads, best of 5 passes
//   weight_bytes_per_token       bytes of weight matrices read per decoded token (every
//                                layer's matrices and the LM head; in a MoE layer the
//                                router, the n_expert_used routed experts and the shared
//                                expert): the active bytes
//   active_weight_bytes_per_token  the same figure, under the name sparse models know it by
//   total_weight_bytes           every weight matrix of the trunk (all experts)
//   roofline_decode_tokens_per_s memory_bandwidth / weight_bytes_per_token
//   model_file_bytes, peak_rss_after_load_bytes
//                                the GGUF's size and the process's peak resident memory
//                                right after loading (mapped weights come in on use)
//
// Everything runs through the engine (scheduler, paged KV cache, sampler): the figures
// are what a server gets, minus HTTP.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "common/logging.h"
#include "engine/engine.h"
#include "kernels/isa.h"
#include "kernels/memory_bandwidth.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct BenchModelFlags {
  ModelFlags model;
  int prompt_tokens = 512;
  int gen_tokens = 128;
  std::vector<int> batches{4, 16};
  int repeat = 3;
  int max_num_batched_tokens = 0;  // 0: the whole prompt in one chunk (at least 2048)
  int batch_prompt_tokens = 16;     // each batched stream's prompt
  int batch_gen_tokens = 0;         // each batched stream's tokens; 0: gen_tokens / 2
  bool json = false;
};

int64_t MatrixBytes(const WeightMatrix& m) { return m.valid() ? m.rows * m.row_bytes : 0; }

// Bytes of weight matrices one decoded token reads (`active`), or all of them.
int64_t WeightBytes(const Model& model, bool active) {
  const ModelWeights& w = model.weights();
  const MoeConfig& moe = model.config().moe;
  int64_t total = MatrixBytes(w.output);
  for (const LayerWeights& l : w.layers) {
    total += MatrixBytes(l.wq) + MatrixBytes(l.wk) + MatrixBytes(l.wv) + MatrixBytes(l.wo) +
             MatrixBytes(l.ffn_gate) + MatrixBytes(l.ffn_up) + MatrixBytes(l.ffn_down);
    const MoeWeights& m = l.moe;
    int64_t experts = MatrixBytes(m.gate.all) + MatrixBytes(m.up.all) + MatrixBytes(m.down.all);
    if (active && m.gate.valid()) experts = experts / moe.n_expert * moe.n_expert_used;
    total += MatrixBytes(m.router) + experts + MatrixBytes(m.shared_gate) +
             MatrixBytes(m.shared_up) + MatrixBytes(m.shared_down);
  }
  return total;
}

// The process's peak resident set (VmHWM of /proc/self/status), bytes; 0 if unknown.
int64_t PeakResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb * 1024;
}

// Runs `n` requests together and records when each produced its first and last token.
struct BatchResult {
  double prefill_seconds = 0;  // first request added -> every request has its first token
  double window_seconds = 0;   // every request past its first token -> all finished
  int64_t window_tokens = 0;   // tokens generated in that window
};

StatusOr<BatchResult> RunBatch(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                               int max_tokens, int tag) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int started = 0, finished = 0;
    std::vector<int> tokens;
    std::vector<int> tokens_at_window;
    Clock::time_point window_start, end;
    Status error;
  };
  auto st = std::make_shared<State>();
  const int n = static_cast<int>(prompts.size());
  st->tokens.assign(n, 0);
  const auto begin = Clock::now();
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.request_id = "bench-" + std::to_string(tag) + "-" + std::to_string(i);
    r.prompt_tokens = prompts[i];
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.sampling.temperature = 0;
    r.on_output = [st, i, n](const RequestOutput& out) {
      std::lock_guard<std::mutex> lock(st->mu);
      const bool first = st->tokens[i] == 0 && out.completion_tokens > 0;
      st->tokens[i] = out.completion_tokens;
      if (first && ++st->started == n) {
        st->window_start = Clock::now();
        st->tokens_at_window = st->tokens;
      }
      if (out.finished) {
        if (out.finish_reason == "error" || out.finish_reason == "abort") st->error = out.error;
        if (++st->finished == n) st->end = Clock::now();
        st->cv.notify_all();
      }
    };
    TANDEM_RETURN_IF_ERROR(engine.AddRequest(std::move(r)));
  }
  std::unique_lock<std::mutex> lock(st->mu);
  st->cv.wait(lock, [&] { return st->finished == n; });
  if (!st->error.ok()) return st->error;
  if (st->started < n) return InternalError("a benchmark request produced no token");
  BatchResult result;
  result.prefill_seconds = Seconds(st->window_start - begin);
  result.window_seconds = Seconds(st->end - st->window_start);
  for (int i = 0; i < n; ++i) result.window_tokens += st->tokens[i] - st->tokens_at_window[i];
  return result;
}

// Token ids for a prompt of exactly `n` tokens, different for each `salt` (so the prefix
// cache never shortens the work): ids drawn from the middle of the vocabulary.
std::vector<int32_t> SyntheticPrompt(const Model& model, int n, int salt) {
  const int32_t vocab = static_cast<int32_t>(model.config().n_vocab);
  std::vector<int32_t> ids;
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(salt + 1);
  const std::vector<int32_t> bos =
      model.tokenizer().Encode("", /*add_special=*/true, /*parse_special=*/false);
  ids.insert(ids.end(), bos.begin(), bos.end());
  while (static_cast<int>(ids.size()) < n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.push_back(static_cast<int32_t>(vocab / 4 + x % static_cast<uint64_t>(vocab / 2)));
  }
  return ids;
}

// The warm-up request's prompt (it then decodes 4 tokens).
constexpr int kWarmupPromptTokens = 32;

int RunBenchModel(const BenchModelFlags& f) {
  const auto load_start = std::chrono::steady_clock::now();
  auto model = LoadModelFromFlags(f.model);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const int64_t peak_rss_after_load = PeakResidentBytes();
  if (!model.ok()) return ReportError(model.status());
  StatusOr<std::vector<int>> cpus = std::vector<int>{};
  if (!f.model.cpu_affinity.empty()) cpus = ParseCpuList(f.model.cpu_affinity);
  if (!cpus.ok()) return ReportError(cpus.status());
  const int max_batch = *std::max_element(f.batches.begin(), f.batches.end());
  EngineOptions o;
  o.threads = f.model.threads;
  o.cpu_ids = *cpus;
  o.enable_prefix_caching = false;
  o.max_num_seqs = std::max(max_batch, 1);
  o.max_num_batched_tokens =
      f.max_num_batched_tokens > 0 ? f.max_num_batched_tokens : std::max(f.prompt_tokens, 2048);
  // Room for the longest request: the prompt run, the decode run (16-token prompt) or
  // the warm-up (32-token prompt, 4 tokens).
  const int batch_gen = f.batch_gen_tokens > 0 ? f.batch_gen_tokens : f.gen_tokens / 2;
  o.max_model_len = std::max({f.prompt_tokens + 8, 16 + f.gen_tokens + 8, kWarmupPromptTokens + 8,
                              f.batch_prompt_tokens + batch_gen + 8});
  o.kv_cache_bytes = int64_t{1} << 30;
  o.kv_cache_dtype = f.model.kv_cache_dtype;
  SetMinLogLevel(LogLevel::kWarning);  // not a line per benchmark request
  auto engine = Engine::Create(**model, o, nullptr);
  if (!engine.ok()) return ReportError(engine.status());
  const int threads = (*engine)->Snapshot().compute_threads;
  int tag = 0;
  // Warm-up: touches the weights and the code paths once.
  if (auto w = RunBatch(**engine, {SyntheticPrompt(**model, kWarmupPromptTokens, 999)}, 4, tag++);
      !w.ok()) {
    return ReportError(w.status());
  }
  double pp = 0, tg = 0;
  for (int r = 0; r < f.repeat; ++r) {
    auto p = RunBatch(**engine, {SyntheticPrompt(**model, f.prompt_tokens, 100 + r)}, 1, tag++);
    if (!p.ok()) return ReportError(p.status());
    pp = std::max(pp, f.prompt_tokens / p->prefill_seconds);
    auto g = RunBatch(**engine, {SyntheticPrompt(**model, 16, 200 + r)}, f.gen_tokens + 1, tag++);
    if (!g.ok()) return ReportError(g.status());
    tg = std::max(tg, g->window_tokens / g->window_seconds);
  }
  std::map<int, double> batched;
  for (int b : f.batches) {
    double best = 0;
    for (int r = 0; r < f.repeat; ++r) {
      std::vector<std::vector<int32_t>> prompts;
      for (int i = 0; i < b; ++i)
        prompts.push_back(SyntheticPrompt(**model, f.batch_prompt_tokens, 1000 * (r + 1) + b * 37 + i));
      auto res = RunBatch(**engine, prompts, batch_gen + 1, tag++);
      if (!res.ok()) return ReportError(res.status());
      best = std::max(best, res->window_tokens / res->window_seconds);
    }
    batched[b] = best;
  }
  (*engine)->Shutdown();
  const double bandwidth = MeasureReadBandwidthGbps({.threads = threads});
  const int64_t bytes = WeightBytes(**model, /*active=*/true);
  const int64_t total_bytes = WeightBytes(**model, /*active=*/false);
  const int64_t file_bytes = static_cast<int64_t>((*model)->source().file_size());
  const double roofline = bandwidth * 1e9 / static_cast<double>(bytes);

  // "w8a8" when matrices were re-quantized at load, else "none" (weights as stored).
  const std::string quantization = (*model)->requantized().matrices > 0 ? "w8a8" : "none";
  const ModelConfig& c = (*model)->config();
  const int64_t kv_bytes_per_token = c.n_layers * (c.KeyRowBytes(f.model.kv_cache_dtype) +
                                                   c.ValueRowBytes(f.model.kv_cache_dtype));
  const char* kv_dtype = KvDtypeName(f.model.kv_cache_dtype);
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  if (f.json) {
    out << "{\"model\": \"" << (*model)->name() << "\", \"threads\": " << threads
        << ", \"quantization\": \"" << quantization << "\""
        << ", \"prompt_tokens\": " << f.prompt_tokens << ", \"prompt_tokens_per_s\": " << pp
        << ", \"decode_tokens\": " << f.gen_tokens << ", \"decode_tokens_per_s\": " << tg
        << ", \"batched_decode_tokens_per_s\": {";
    bool first = true;
    for (auto [b, v] : batched) {
      out << (first ? "" : ", ") << "\"" << b << "\": " << v;
      first = false;
    }
    out << "}, \"memory_bandwidth_gb_s\": " << bandwidth
        << ", \"weight_bytes_per_token\": " << bytes
        << ", \"active_weight_bytes_per_token\": " << bytes
        << ", \"total_weight_bytes\": " << total_bytes << ", \"model_file_bytes\": " << file_bytes
        << ", \"peak_rss_after_load_bytes\": " << peak_rss_after_load
        << ", \"load_seconds\": " << load_seconds
        << ", \"roofline_decode_tokens_per_s\": " << roofline
        << ", \"decode_roofline_fraction\": " << (roofline > 0 ? tg / roofline : 0)
        << ", \"kv_cache_dtype\": \"" << kv_dtype
        << "\", \"kv_cache_bytes_per_token\": " << kv_bytes_per_token
        << ", \"kv_cache_tokens_per_gib\": " << (int64_t{1} << 30) / kv_bytes_per_token
        << ", \"isa\": \"" << KernelIsaName() << "\"}\n";
  } else {
    out << "model " << (*model)->name() << ", " << threads << " thread(s), kernels " << KernelIsaReport()
        << (quantization == "w8a8" ? ", weights re-quantized to Q8_0 (w8a8)" : "") << "\n"
        << "prompt (" << f.prompt_tokens << " tokens): " << pp << " tok/s\n"
        << "decode (1 stream): " << tg << " tok/s\n";
    for (auto [b, v] : batched) {
      out << "decode (" << b << " streams): " << v << " tok/s total (" << (tg > 0 ? v / tg : 0)
          << "x one stream)\n";
    }
    out << "memory bandwidth: " << bandwidth << " GB/s; weights read per token: " << bytes / 1e6
        << " MB; roofline " << roofline << " tok/s (decode at "
        << 100 * (roofline > 0 ? tg / roofline : 0) << "%)\n";
    if (total_bytes != bytes) {
      out << "sparse model: " << total_bytes / 1e6 << " MB of weight matrices, " << bytes / 1e6
          << " MB active per token\n";
    }
    out << "KV cache " << kv_dtype << ": " << kv_bytes_per_token << " bytes per token, "
        << (int64_t{1} << 30) / kv_bytes_per_token << " tokens per GiB\n";
    out << "model file " << file_bytes / 1e6 << " MB; peak resident memory after load "
        << peak_rss_after_load / 1e6 << " MB\n";
  }
  std::fputs(out.str().c_str(), stdout);
  return 0;
}

}  // namespace

void RegisterBenchModel(CLI::App& bench, RunFn* run) {
  auto flags = std::make_shared<BenchModelFlags>();
  CLI::App* cmd = bench.add_subcommand("model",
                                       "engine throughput on a model (prompt, decode, batched "
                                       "decode) beside the bandwidth roofline");
  AddModelFlags(*cmd, &flags->model);
  cmd->add_option("--prompt-tokens", flags->prompt_tokens, "prompt length for prompt_tokens_per_s")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--gen-tokens", flags->gen_tokens, "tokens decoded for decode_tokens_per_s")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--batch", flags->batches, "batch sizes for batched_decode_tokens_per_s")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--batch-prompt-tokens", flags->batch_prompt_tokens,
                  "prompt length of each batched stream (llama-batched-bench's -npp)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--batch-gen-tokens", flags->batch_gen_tokens,
                  "tokens each batched stream generates (llama-batched-bench's -ntg; default "
                  "--gen-tokens / 2)")
      ->check(CLI::Range(2, 1 << 16));
  cmd->add_option("--repeat", flags->repeat, "runs of each measurement (the best is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags->max_num_batched_tokens,
                  "tokens per engine step, so a longer prompt is prefilled in chunks (default: the "
                  "whole prompt in one chunk)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", flags->json, "print one JSON object");
  cmd->callback([flags, run] { *run = [flags]() -> int { return RunBenchModel(*flags); }; });
}

}  // namespace tandem::cli
