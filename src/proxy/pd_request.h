// PdRequest: one client completion (or chat completion) through the PD cluster.
//
//   1. prefill: the least-loaded prefiller computes the prompt (PrefillBody) and answers
//      with kv_transfer_params and its true cached_tokens;
//   2. decode: the least-loaded decoder gets the client's body plus those params
//      (DecodeBody); its response streams back through a DecodeOutputFilter;
//   3. a decoder that ends the request with stop_reason "recomputed" sends the proxy
//      back to 1 with the continuation body.
// With workers (--worker-urls) there is no step 1: the worker gets the client's body
// unchanged and answers the whole request, through the same retries and filter.
// The routed phase (1, or the worker) picks its instance by ProxyOptions::routing_policy;
// prefix_aware first scores the request with the PrefixRouter (asynchronously).
// Transport errors and 5xx answers before any byte reached the client mark the
// backend down and retry on another one (ProxyOptions::max_retries attempts per phase,
// exponential back-off); without ProxyOptions::retry_sent_requests the decode/worker
// phase retries only requests the backend cannot have seen (HttpStreamCallbacks::on_sent
// did not run: connect failures) or refused as overloaded (503/429). A backend 4xx goes
// to the client as it is. Every other failure
// ends the request with an OpenAI error: a JSON error before the response started, an
// SSE error event and [DONE] after. When the client leaves, or the decode phase fails
// for good, after a prefiller answered with kv_transfer_params, the proxy tells that
// prefiller to free the blocks (POST /kv_transfer/abort).
//
// Thread safety: a PdRequest owns itself (shared_ptr captured by its pending calls and
// timers); its events (backend callbacks, timers, the client's disconnect) arrive on
// I/O threads and are serialized by its mutex.
#pragma once

#include <memory>
#include <string>

#include "net/http_response_writer.h"
#include "proxy/backend_io.h"
#include "proxy/backend_registry.h"
#include "proxy/pd_bodies.h"
#include "proxy/proxy_metrics.h"
#include "proxy/proxy_options.h"

namespace tandem::proxy {

class PrefixRouter;

// What every request of one proxy shares; borrowed, outlives the requests' callbacks.
struct ProxyContext {
  const ProxyOptions* options;
  BackendRegistry* registry;
  BackendIo* io;
  ProxyMetrics* metrics;
  PrefixRouter* router = nullptr;  // set with prefix_aware
};

struct PdRequestParams {
  std::string target;         // "/v1/completions" or "/v1/chat/completions"
  Json body;                  // the client's body, parsed
  std::string raw_body;       // ... and as sent
  std::string request_id;     // X-Request-Id sent to both backends
  std::string authorization;  // Authorization sent to backends ("" = none)
};

// Starts serving one request; answers through `writer`, always with a terminal status.
void StartPdRequest(ProxyContext* context, PdRequestParams params,
                    std::shared_ptr<net::HttpResponseWriter> writer);

}  // namespace tandem::proxy
