// The OpenAI-compatible route handlers. Each parses and validates its request, answers
// errors at once, and for generation hands the request to the engine through
// ServingContext::StartGeneration.
//
// Thread safety: handlers run on HttpServer I/O threads, concurrently; they only read
// the ServingContext (whose mutable parts are internally locked).
#pragma once

#include <memory>

#include "net/http_request.h"
#include "net/http_response_writer.h"
#include "server/serving_context.h"

namespace tandem::server {

using WriterPtr = std::shared_ptr<net::HttpResponseWriter>;

// POST /v1/completions
void HandleCompletion(ServingContext& ctx, const net::HttpRequest& request,
                      const WriterPtr& writer);
// POST /v1/chat/completions
void HandleChatCompletion(ServingContext& ctx, const net::HttpRequest& request,
                          const WriterPtr& writer);
// POST /tokenize
void HandleTokenize(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer);
// POST /detokenize
void HandleDetokenize(ServingContext& ctx, const net::HttpRequest& request,
                      const WriterPtr& writer);
// GET /v1/models
void HandleModels(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer);
// POST /kv_transfer/abort {"remote_request_id": ID}: a producer frees a kept request's
// KV blocks at once (the proxy, when the client left or no decoder took the request).
void HandleKvTransferAbort(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer);
// POST /reset_prefix_cache (vLLM's): drops the engine's prefix cache before its next step;
// 200 with an empty body.
void HandleResetPrefixCache(ServingContext& ctx, const net::HttpRequest& request,
                            const WriterPtr& writer);
// GET /metrics: the registry in Prometheus text, engine gauges refreshed first.
void HandleMetrics(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer);

}  // namespace tandem::server
