// `tandem`: one binary, many subcommands. Parses flags and dispatches; no logic here.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  // A write to a socket whose peer is gone fails with EPIPE instead of killing the process:
  // Gloo writes with plain writev, so an expert-parallel rank that lost a peer died of
  // SIGPIPE before it could fail its requests (Asio's sockets already send MSG_NOSIGNAL).
  // Children started by the process supervisor get the default action back.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"Tandem: LLM serving with prefill/decode disaggregation and a KV-cache pool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem 0.1.0");
  tandem::cli::RunFn run;
  tandem::cli::RegisterBench(app, &run);
  tandem::cli::RegisterDumpTensors(app, &run);
  tandem::cli::RegisterGenerate(app, &run);
  tandem::cli::RegisterLaunch(app, &run);
  tandem::cli::RegisterPerplexity(app, &run);
  tandem::cli::RegisterPool(app, &run);
  tandem::cli::RegisterProbe(app, &run);
  tandem::cli::RegisterProxy(app, &run);
  tandem::cli::RegisterServe(app, &run);
  tandem::cli::RegisterUp(app, &run);
  tandem::cli::RegisterDown(app, &run);
  tandem::cli::RegisterWatch(app, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Unknown flags, missing or malformed values: a clear message and exit code 2.
    std::cerr << "tandem: " << e.what() << "\n";
    std::cerr << "run 'tandem --help' for usage\n";
    return 2;
  }
  return run ? run() : 2;
}
