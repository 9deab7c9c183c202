#include "proxy/health_prober.h"

#include <cmath>

#include "common/logging.h"

namespace tandem::proxy {

void HealthProber::Start() {
  io_->RunAfter(options_.health_check_interval, [this] { DownRound(); });
  io_->RunAfter(options_.health_check_interval, [this] { UpRound(); });
  auto waiting = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(options_.waiting_retry_interval_s * 1000)));
  io_->RunAfter(waiting, [this] { PendingRound(); });
}

void HealthProber::Probe(const BackendAddress& address, std::function<void(bool healthy)> done) {
  ProbeStatus(address, [done = std::move(done)](int status) { done(status == 200); });
}

void HealthProber::ProbeStatus(const BackendAddress& address,
                               std::function<void(int status)> done) {
  net::HttpClientRequest request;
  request.method = "GET";
  request.host = address.host;
  request.port = address.port;
  request.target = "/health";
  request.timeout = options_.probe_timeout;
  if (!authorization_.empty()) request.headers.Set("Authorization", authorization_);
  auto started = io_->Fetch(std::move(request), [done](StatusOr<net::HttpResponse> response) {
    done(response.ok() ? response->status : 0);
  });
  if (!started) done(0);
}

void HealthProber::UpRound() {
  for (const BackendPtr& backend : registry_->InState(Backend::State::kUp)) {
    ProbeStatus(backend->address(), [this, backend](int status) {
      if (status != 503) return;
      TANDEM_LOG(WARNING) << "instance " << backend->address().Key()
                          << " answers /health with 503; marking it down";
      registry_->MarkDown(backend);
    });
  }
  io_->RunAfter(options_.health_check_interval, [this] { UpRound(); });
}

void HealthProber::DownRound() {
  for (const BackendPtr& backend : registry_->InState(Backend::State::kDown)) {
    Probe(backend->address(), [this, backend](bool healthy) {
      if (healthy) registry_->MarkUp(backend);
    });
  }
  io_->RunAfter(options_.health_check_interval, [this] { DownRound(); });
}

void HealthProber::PendingRound() {
  for (const BackendPtr& backend : registry_->InState(Backend::State::kPending)) {
    Probe(backend->address(), [this, backend](bool healthy) {
      if (healthy) {
        registry_->MarkUp(backend);
      } else {
        registry_->PendingProbeFailed(backend, options_.max_waiting_retries);
      }
    });
  }
  auto waiting = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(options_.waiting_retry_interval_s * 1000)));
  io_->RunAfter(std::max(waiting, std::chrono::milliseconds(10)), [this] { PendingRound(); });
}

}  // namespace tandem::proxy
