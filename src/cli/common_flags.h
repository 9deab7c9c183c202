// Flags shared by the model-running subcommands, and helpers to act on them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "model/model.h"

namespace CLI {
class App;
}

namespace tandem::cli {

struct ModelFlags {
  std::string model;         // --model (or positional where the command takes one)
  int threads = 0;           // --threads; 0 = all cores in the affinity set
  std::string cpu_affinity;  // --cpu-affinity "0,1" or "0-3"
  std::string quantization;  // --quantization w8a8|ascend; empty = absent
  ExpertShard expert_shard;  // serve --enable-expert-parallel: this rank's experts only
  KvDtype kv_cache_dtype = KvDtype::kF16;  // --kv-cache-dtype (not serve's: that is ServeConfig's)
};

// --model, --threads, --cpu-affinity, --quantization and --kv-cache-dtype.
void AddModelFlags(CLI::App& cmd, ModelFlags* flags);

// --kv-cache-dtype, checked while parsing: an unknown value is a parse error (exit 2)
// naming the accepted values.
void AddKvCacheDtypeFlag(CLI::App& cmd, KvDtype* value);

// --quantization, checked while parsing: a value other than w8a8 or ascend is a parse
// error (exit 2) naming the accepted values.
void AddQuantizationFlag(CLI::App& cmd, std::string* value);

// Parses "0,2-3" into {0, 2, 3}; InvalidArgument on bad syntax.
StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

// Resolves and loads the model (re-quantized as --quantization says), logging what was
// loaded.
StatusOr<std::unique_ptr<Model>> LoadModelFromFlags(const ModelFlags& flags);

// The compute threads the flags ask for: --threads, else one per --cpu-affinity core,
// else the cores in this process's affinity set.
StatusOr<int> ThreadCount(const ModelFlags& flags);

// Builds the thread pool the flags ask for (pinned as --cpu-affinity says).
StatusOr<std::unique_ptr<ThreadPool>> MakeThreadPool(const ModelFlags& flags);

// Prints "tandem: <message>" to stderr and returns the exit code for `status`
// (2 for invalid input, 1 otherwise).
int ReportError(const Status& status);

}  // namespace tandem::cli
