// OpenAiServer: the OpenAI-compatible HTTP front end of one engine (`tandem serve`).
//
// Routes (vLLM's): POST /v1/completions, POST /v1/chat/completions (both with SSE
// streaming), GET /v1/models, GET /health, GET /metrics, POST /tokenize,
// POST /detokenize, GET /version. With an API key every route needs
// "Authorization: Bearer <key>" (401 otherwise), except /health, /metrics and /version
// when no_auth_health_metrics is set (net/api_key.h). Errors are OpenAI
// error JSON with vLLM's status codes; unknown routes are 404, oversized bodies 413
// (HttpServer), a full engine queue 503.
//
// Ownership: borrows the Model, Engine and MetricsRegistry; they must outlive the
// server. Stop() before shutting the engine down, so no handler reaches a dead engine.
// Thread safety: Start/Stop/port from one controlling thread; handlers run on the HTTP
// server's I/O threads.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "server/serving_context.h"

namespace tandem::net {
class HttpServer;
}

namespace tandem::server {

class OpenAiServer {
 public:
  // Builds the chat prompt (the model's template or a built-in one) and the routes.
  // InvalidArgument for bad options (no served name, max_model_len <= 0) or a chat
  // template that does not parse.
  static StatusOr<std::unique_ptr<OpenAiServer>> Create(ServerOptions options, const Model& model,
                                                        Engine& engine, MetricsRegistry* metrics);
  ~OpenAiServer();

  // Binds and starts serving (Unavailable when the port is taken).
  Status Start();
  // Graceful: stops accepting, lets in-flight responses finish for the grace period.
  void Stop();
  uint16_t port() const;

 private:
  OpenAiServer() = default;
  void AddRoutes();

  std::unique_ptr<ServingContext> context_;
  std::unique_ptr<net::HttpServer> http_;
};

}  // namespace tandem::server
