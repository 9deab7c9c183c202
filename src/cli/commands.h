// The `tandem` subcommands. Each Register* adds its flags to the CLI11 app and sets
// `*run` (called after parsing when that subcommand was chosen), returning the exit code.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace tandem::cli {

using RunFn = std::function<int()>;

void RegisterBench(CLI::App& app, RunFn* run);
void RegisterBenchModel(CLI::App& bench, RunFn* run);  // `tandem bench model`
void RegisterDumpTensors(CLI::App& app, RunFn* run);
void RegisterGenerate(CLI::App& app, RunFn* run);
void RegisterLaunch(CLI::App& app, RunFn* run);
void RegisterPerplexity(CLI::App& app, RunFn* run);
void RegisterPool(CLI::App& app, RunFn* run);
void RegisterProbe(CLI::App& app, RunFn* run);
void RegisterProxy(CLI::App& app, RunFn* run);
void RegisterServe(CLI::App& app, RunFn* run);
void RegisterUp(CLI::App& app, RunFn* run);
void RegisterDown(CLI::App& app, RunFn* run);
void RegisterWatch(CLI::App& app, RunFn* run);

}  // namespace tandem::cli
