// HealthProber: brings instances back (kDown -> kUp) and in (kPending -> kUp).
//
// Every health_check_interval it sends GET /health to each kDown instance; a 200 marks
// it up. Every waiting_retry_interval it probes each kPending instance (added through
// /instances/add) the same way; after max_waiting_retries failed probes the instance
// is dropped. Every health_check_interval it also probes each kUp instance: one that
// answers 503 (its engine loop is stuck or gone: `tandem serve`'s /health watchdog) is
// marked down, and comes back through the kDown rounds once it answers 200. A kUp
// instance that does not answer, or answers anything else, is left to the request path
// (failed requests mark it down). Probes go through BackendIo, so they stop when it closes.
//
// Thread safety: all methods are thread-safe. The prober must outlive `io`'s callbacks
// (destroy it after io->Close()).
#pragma once

#include <functional>
#include <string>

#include "proxy/backend_io.h"
#include "proxy/backend_registry.h"
#include "proxy/proxy_options.h"

namespace tandem::proxy {

class HealthProber {
 public:
  // Borrows everything; `authorization` is the header value sent with probes ("" none).
  HealthProber(const ProxyOptions& options, BackendRegistry* registry, BackendIo* io,
               std::string authorization)
      : options_(options), registry_(registry), io_(io), authorization_(std::move(authorization)) {}

  // Starts the periodic rounds.
  void Start();

  // Probes `address` once; `done(healthy)` runs on an I/O thread (at once with false
  // when io is closed).
  void Probe(const BackendAddress& address, std::function<void(bool healthy)> done);
  // The same probe; `done(status)` gets the HTTP status, or 0 when there was no answer.
  void ProbeStatus(const BackendAddress& address, std::function<void(int status)> done);

 private:
  void DownRound();
  void UpRound();
  void PendingRound();

  const ProxyOptions& options_;
  BackendRegistry* const registry_;
  BackendIo* const io_;
  const std::string authorization_;
};

}  // namespace tandem::proxy
