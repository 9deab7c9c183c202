#include "cli/common_flags.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "common/logging.h"
#include "kernels/isa.h"

namespace tandem::cli {

void AddModelFlags(CLI::App& cmd, ModelFlags* flags) {
  cmd.add_option("-m,--model", flags->model,
                 "GGUF model file (default: $TANDEM_MODEL, then the assembled default model)");
  cmd.add_option("-t,--threads", flags->threads, "compute threads (default: cores available)")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--cpu-affinity", flags->cpu_affinity,
                 "pin compute threads to these cores, e.g. 0,1 or 0-3");
  AddQuantizationFlag(cmd, &flags->quantization);
  AddKvCacheDtypeFlag(cmd, &flags->kv_cache_dtype);
}

void AddKvCacheDtypeFlag(CLI::App& cmd, KvDtype* value) {
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype",
         [value](const std::string& name) {
           auto dtype = ParseKvCacheDtype(name);
           if (!dtype.ok()) throw CLI::ValidationError(dtype.status().message());
           *value = *dtype;
         },
         "KV cache element type: auto (fp16), fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2")
      ->default_str("auto");
}

void AddQuantizationFlag(CLI::App& cmd, std::string* value) {
  CLI::Validator accepted(
      [](std::string& v) -> std::string {
        if (ParseWeightQuantization(v).ok() && !v.empty()) return "";
        return "unknown value '" + v + "' (accepted: " + kAcceptedQuantizations + ")";
      },
      "w8a8|ascend");
  cmd.add_option("--quantization", *value,
                 "w8a8: re-quantize F16/BF16/F32 weight matrices to Q8_0 at load (int8 dots); "
                 "ascend (vLLM-Ascend's value): weights used as stored")
      ->check(accepted);
}

StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) return InvalidArgumentError("empty entry in CPU list '" + text + "'");
    size_t dash = part.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        int v = std::stoi(part, &used);
        if (used != part.size() || v < 0) throw std::invalid_argument(part);
        cpus.push_back(v);
      } else {
        int a = std::stoi(part.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(part);
        int b = std::stoi(part.substr(dash + 1), &used);
        if (used != part.size() - dash - 1 || a < 0 || b < a || b - a > 4096)
          throw std::invalid_argument(part);
        for (int v = a; v <= b; ++v) cpus.push_back(v);
      }
    } catch (const std::exception&) {
      return InvalidArgumentError("bad CPU list '" + text + "' (expected e.g. 0,1 or 0-3)");
    }
  }
  if (cpus.empty()) return InvalidArgumentError("empty CPU list");
  return cpus;
}

StatusOr<std::unique_ptr<Model>> LoadModelFromFlags(const ModelFlags& flags) {
  TANDEM_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(flags.model));
  ModelLoadOptions options;
  TANDEM_ASSIGN_OR_RETURN(options.quantization, ParseWeightQuantization(flags.quantization));
  if (flags.quantization == "ascend") {
    TANDEM_LOG(INFO)
        << "--quantization ascend: weights used as stored in the file (no re-quantization on CPU)";
  }
  // TANDEM_NO_REPACK=1 keeps Q5_0 / Q4_0 matrices in their file layout (same outputs;
  // for A/B measurements of the repacked kernels).
  const char* no_repack = std::getenv("TANDEM_NO_REPACK");
  options.repack_for_tile = no_repack == nullptr || std::string(no_repack) != "1";
  options.expert_shard = flags.expert_shard;
  std::unique_ptr<ThreadPool> load_pool;
  if (options.quantization == WeightQuantization::kW8A8) {
    // As many threads as computing will use, unpinned: pinning would pin this (the
    // caller's) thread too, and the pool lives only while the model loads.
    TANDEM_ASSIGN_OR_RETURN(int threads, ThreadCount(flags));
    load_pool = std::make_unique<ThreadPool>(threads);
    options.pool = load_pool.get();
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(path, options));
  const ModelConfig& c = model->config();
  TANDEM_LOG(INFO) << "loaded " << path << ": " << c.arch << ", " << c.n_layers
                   << " layers, n_embd " << c.n_embd << ", vocab " << c.n_vocab << ", context "
                   << c.context_length;
  TANDEM_LOG(INFO) << "kernels: " << KernelIsaReport();
  return model;
}

StatusOr<int> ThreadCount(const ModelFlags& flags) {
  if (flags.threads > 0) return flags.threads;
  if (!flags.cpu_affinity.empty()) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int> cpus, ParseCpuList(flags.cpu_affinity));
    return static_cast<int>(cpus.size());
  }
  return CoresAvailable();
}

StatusOr<std::unique_ptr<ThreadPool>> MakeThreadPool(const ModelFlags& flags) {
  std::vector<int> cpus;
  if (!flags.cpu_affinity.empty()) {
    TANDEM_ASSIGN_OR_RETURN(cpus, ParseCpuList(flags.cpu_affinity));
  }
  TANDEM_ASSIGN_OR_RETURN(int threads, ThreadCount(flags));
  return std::make_unique<ThreadPool>(threads, cpus);
}

int ReportError(const Status& status) {
  std::cerr << "tandem: " << status.message() << "\n";
  // Bad input (a flag, a file, a model Tandem cannot run) exits 2; anything else 1.
  return status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound ||
                 status.code() == StatusCode::kUnimplemented
             ? 2
             : 1;
}

}  // namespace tandem::cli
