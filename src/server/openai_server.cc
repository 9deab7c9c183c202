#include "server/openai_server.h"

#include "common/logging.h"
#include "model/model.h"
#include "net/api_key.h"
#include "net/http_server.h"
#include "server/handlers.h"
#include "server/json_fields.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif

namespace tandem::server {

StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Create(ServerOptions options,
                                                             const Model& model, Engine& engine,
                                                             MetricsRegistry* metrics) {
  if (options.served_model_names.empty()) return InvalidArgumentError("no served model name");
  if (options.max_model_len <= 0) return InvalidArgumentError("max_model_len must be positive");
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ChatPrompt> chat, ChatPrompt::Create(model));
  std::unique_ptr<OpenAiServer> server(new OpenAiServer());
  net::HttpServerOptions http = options.http;
  server->context_ =
      std::make_unique<ServingContext>(std::move(options), model, engine, metrics, std::move(chat));
  server->http_ = std::make_unique<net::HttpServer>(http);
  server->AddRoutes();
  return server;
}

OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::AddRoutes() {
  ServingContext* ctx = context_.get();
  using Handler = void (*)(ServingContext&, const net::HttpRequest&, const WriterPtr&);
  // Wraps a handler with the API-key check; with --no-auth-health-metrics the health
  // and metrics routes skip it (vLLM leaves them open always; docs/SECURITY.md).
  auto route = [this, ctx](const char* method, const char* path, Handler handler) {
    const bool open = ctx->options().no_auth_health_metrics && net::HealthOrMetricsPath(path);
    http_->Route(method, path, [ctx, handler, open](net::HttpRequest request, WriterPtr writer) {
      if (!open && !net::HasApiKey(request, ctx->options().api_key)) {
        net::SendError(*writer, 401, "Unauthorized");
        return;
      }
      handler(*ctx, request, writer);
    });
  };
  route("POST", "/v1/completions", HandleCompletion);
  route("POST", "/v1/chat/completions", HandleChatCompletion);
  route("GET", "/v1/models", HandleModels);
  route("POST", "/tokenize", HandleTokenize);
  route("POST", "/detokenize", HandleDetokenize);
  route("POST", "/kv_transfer/abort", HandleKvTransferAbort);
  route("POST", "/reset_prefix_cache", HandleResetPrefixCache);
  route("GET", "/metrics", HandleMetrics);
  route("GET", "/health", [](ServingContext& c, const net::HttpRequest&, const WriterPtr& writer) {
    // 503 with the reason when the engine loop is stuck or gone (Engine::Health), so
    // the proxy's health checks take this instance out.
    const EngineHealth health = c.engine().Health();
    if (!health.healthy) {
      net::SendError(*writer, 503, health.reason);
      return;
    }
    writer->SendResponse(200, {{"Content-Type", "text/plain"}}, "");
  });
  route("GET", "/version", [](ServingContext&, const net::HttpRequest&, const WriterPtr& writer) {
    net::SendJson(*writer, 200, DumpJson(Json{{"version", TANDEM_VERSION}}));
  });
}

Status OpenAiServer::Start() {
  TANDEM_RETURN_IF_ERROR(http_->Start());
  TANDEM_LOG(INFO) << "serving " << context_->served_model() << " (OpenAI API) on "
                   << context_->options().http.host << ":" << http_->port();
  return Status();
}

void OpenAiServer::Stop() {
  if (http_) http_->Stop();
}

uint16_t OpenAiServer::port() const { return http_->port(); }

}  // namespace tandem::server
