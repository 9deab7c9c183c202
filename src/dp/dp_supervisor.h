// RunDataParallel: the process that `tandem serve` becomes in DpMode::kFrontEnd or
// kHeadless (dp_layout.h). It
//   - starts the M local ranks as child processes (ops::ProcessSupervisor, each in its
//     own process group, stopped with this process), restarting a rank that dies
//     (back-off from 1 s; exit code 2, bad input, stops everything instead);
//   - kFrontEnd: serves the DpFrontEnd on --host/--port, registers the local ranks with
//     it and marks a rank down the moment its process dies;
//   - kHeadless: registers its ranks with the front end at A:P (POST /dp/ranks) and
//     re-registers them every few seconds (so a front end that starts later, or
//     restarts, learns them), reports a dead rank as "down". Until the first
//     registration succeeds it logs, every few seconds, that it is waiting for the
//     front end; after `join_timeout` without an answer it stops its ranks and exits 2
//     naming the address.
// SIGINT/SIGTERM are forwarded to every rank (each lets its responses in flight end
// within its grace period), then the front end stops.
//
// Thread safety: call from the main thread, before any other thread starts (the
// supervisor's signal mask must be inherited by every thread).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dp/dp_layout.h"
#include "proxy/proxy_options.h"

namespace tandem::dp {

struct DpRunOptions {
  DpPlan plan;                               // kFrontEnd or kHeadless, with its ranks
  std::string exe;                           // this binary (for the ranks' command lines)
  std::vector<std::string> user_args;        // `tandem serve` arguments, StripSupervisorFlags'd
  std::string rank_host = "127.0.0.1";       // the ranks' --host
  std::string advertise_host = "127.0.0.1";  // how the front end reaches them (headless)
  proxy::ProxyOptions front_end;             // kFrontEnd: host, port, key, limits, io threads
  std::string api_key;                       // sent with registrations (headless)
  std::chrono::milliseconds join_timeout{300'000};
  std::chrono::milliseconds register_interval{2'000};
};

// Runs until a stop signal, or a fatal failure; returns the exit code.
int RunDataParallel(const DpRunOptions& options);

}  // namespace tandem::dp
