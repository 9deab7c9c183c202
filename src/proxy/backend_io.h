// BackendIo: the proxy's outgoing I/O (one HttpClient and one TimerService) behind a
// gate that shutdown closes.
//
// Requests and probes start calls from client callbacks and timers; once Close() has
// begun, nothing new may start on a client that is being destroyed. Every method here
// returns null/false instead, and the caller ends its work.
//
// Thread safety: all methods are thread-safe. Close() must not be called from a
// callback of this object's client or timers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <shared_mutex>

#include "net/http_client.h"
#include "net/timer_service.h"

namespace tandem::proxy {

class BackendIo {
 public:
  explicit BackendIo(net::HttpClientOptions options);
  ~BackendIo();  // Close()s

  // As HttpClient::Stream / FetchAsync; null (and no callback ever) once closed.
  std::shared_ptr<net::HttpClientStream> Stream(net::HttpClientRequest request,
                                                net::HttpStreamCallbacks callbacks);
  std::shared_ptr<net::HttpClientStream> Fetch(
      net::HttpClientRequest request, std::function<void(StatusOr<net::HttpResponse>)> done);
  // As TimerService::RunAfter; false (and no callback) once closed.
  bool RunAfter(std::chrono::milliseconds delay, std::function<void()> callback);

  // Stops new calls, drops pending timers, cancels calls in flight (their callbacks run
  // with Cancelled before this returns) and joins the I/O threads. Idempotent.
  void Close();

 private:
  mutable std::shared_mutex mu_;  // shared: starting a call; exclusive: closing the gate
  bool closed_ = false;
  std::unique_ptr<net::TimerService> timers_;
  std::unique_ptr<net::HttpClient> client_;
};

}  // namespace tandem::proxy
