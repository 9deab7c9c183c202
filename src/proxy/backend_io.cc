#include "proxy/backend_io.h"

#include <mutex>

namespace tandem::proxy {

BackendIo::BackendIo(net::HttpClientOptions options)
    : timers_(std::make_unique<net::TimerService>()),
      client_(std::make_unique<net::HttpClient>(std::move(options))) {}

BackendIo::~BackendIo() { Close(); }

std::shared_ptr<net::HttpClientStream> BackendIo::Stream(net::HttpClientRequest request,
                                                         net::HttpStreamCallbacks callbacks) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (closed_) return nullptr;
  return client_->Stream(std::move(request), std::move(callbacks));
}

std::shared_ptr<net::HttpClientStream> BackendIo::Fetch(
    net::HttpClientRequest request, std::function<void(StatusOr<net::HttpResponse>)> done) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (closed_) return nullptr;
  return client_->FetchAsync(std::move(request), std::move(done));
}

bool BackendIo::RunAfter(std::chrono::milliseconds delay, std::function<void()> callback) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (closed_) return false;
  timers_->RunAfter(delay, std::move(callback));
  return true;
}

void BackendIo::Close() {
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  // Outside the lock: the cancelled calls' callbacks run now and find the gate closed.
  timers_.reset();
  client_.reset();
}

}  // namespace tandem::proxy
