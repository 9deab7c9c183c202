// `tandem generate` and `tandem perplexity`: run the model on text from the command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "engine/generator.h"

namespace tandem::cli {

void RegisterGenerate(CLI::App& app, RunFn* run) {
  struct Flags {
    ModelFlags model;
    std::string prompt;
    GenerateOptions options;
    bool ignore_eos = false;
    bool verbose = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt (streams to stdout)");
  AddModelFlags(*cmd, &flags->model);
  cmd->add_option("-p,--prompt", flags->prompt, "prompt text")->required();
  cmd->add_option("-n,--max-tokens", flags->options.max_tokens, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--temperature,--temp", flags->options.sampling.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", flags->options.sampling.top_k)->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--top-p", flags->options.sampling.top_p)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", flags->options.sampling.min_p)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("-s,--seed", flags->options.sampling.seed, "sampling seed");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_flag("-v,--verbose", flags->verbose, "print timings to stderr");
  cmd->callback([flags, run] {
    *run = [flags]() -> int {
      auto model = LoadModelFromFlags(flags->model);
      if (!model.ok()) return ReportError(model.status());
      auto pool = MakeThreadPool(flags->model);
      if (!pool.ok()) return ReportError(pool.status());
      flags->options.stop_at_eos = !flags->ignore_eos;
      flags->options.kv_dtype = flags->model.kv_cache_dtype;
      GenerateStats stats;
      Status s = Generate(**model, pool->get(), flags->prompt, flags->options,
                          [](std::string_view text) {
                            std::fwrite(text.data(), 1, text.size(), stdout);
                            std::fflush(stdout);
                          },
                          &stats);
      std::fputc('\n', stdout);
      if (!s.ok()) return ReportError(s);
      if (flags->verbose) {
        std::fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s); generated: %d tokens in %.3f s (%.1f tok/s)\n",
                     stats.prompt_tokens, stats.prompt_seconds,
                     stats.prompt_tokens / std::max(stats.prompt_seconds, 1e-9), stats.generated_tokens,
                     stats.decode_seconds, stats.generated_tokens / std::max(stats.decode_seconds, 1e-9));
      }
      return 0;
    };
  });
}

void RegisterPerplexity(CLI::App& app, RunFn* run) {
  struct Flags {
    ModelFlags model;
    std::string file;
    int ctx = 512;
    int chunks = -1;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a text file (llama-perplexity's method)");
  AddModelFlags(*cmd, &flags->model);
  cmd->add_option("-f,--file", flags->file, "text file")->required();
  cmd->add_option("-c,--ctx", flags->ctx, "window size in tokens")->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", flags->chunks, "score at most this many windows (default: all)");
  cmd->callback([flags, run] {
    *run = [flags]() -> int {
      std::ifstream in(flags->file, std::ios::binary);
      if (!in) return ReportError(InvalidArgumentError("cannot read " + flags->file));
      std::stringstream ss;
      ss << in.rdbuf();
      auto model = LoadModelFromFlags(flags->model);
      if (!model.ok()) return ReportError(model.status());
      auto pool = MakeThreadPool(flags->model);
      if (!pool.ok()) return ReportError(pool.status());
      auto result = Perplexity(
          **model, pool->get(), ss.str(), flags->ctx, flags->chunks,
          [](int chunk, double ppl) {
            std::printf("[%d]%.4f,", chunk + 1, ppl);
            std::fflush(stdout);
          },
          flags->model.kv_cache_dtype);
      if (!result.ok()) return ReportError(result.status());
      std::printf("\n%d chunks, %lld tokens scored, %.2f s\n", result->num_chunks,
                  static_cast<long long>(result->scored_tokens), result->seconds);
      std::printf("Final estimate: PPL = %.4f +/- %.5f\n", result->ppl, result->ppl_stderr);
      return 0;
    };
  });
}

}  // namespace tandem::cli
