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
};

void AddModelFlags(CLI::App& cmd, ModelFlags* flags);

// Parses "0,2-3" into {0, 2, 3}; InvalidArgument on bad syntax.
StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

// Resolves and loads the model, logging what was loaded.
StatusOr<std::unique_ptr<Model>> LoadModelFromFlags(const ModelFlags& flags);

// Builds the thread pool the flags ask for.
StatusOr<std::unique_ptr<ThreadPool>> MakeThreadPool(const ModelFlags& flags);

// Prints "tandem: <message>" to stderr and returns the exit code for `status`
// (2 for invalid input, 1 otherwise).
int ReportError(const Status& status);

}  // namespace tandem::cli
