#include "server/openai_server.h"

#include "common/logging.h"
#include "model/model.h"
#include "net/http_server.h"
#include "server/handlers.h"
#include "server/json_fields.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif

namespace tandem::server {
namespace {

// Compares without an early exit, so the key cannot be found byte by byte from timings.
bool SameSecret(std::string_view given, std::string_view key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

}  // namespace

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
  // Wraps a handler with the API-key check; `open` routes skip it (as vLLM's /health).
  auto route = [this, ctx](const char* method, const char* path, Handler handler, bool open) {
    http_->Route(method, path, [ctx, handler, open](net::HttpRequest request, WriterPtr writer) {
      const std::string& key = ctx->options().api_key;
      if (!open && !key.empty()) {
        std::string_view auth = request.headers.Get("Authorization").value_or("");
        constexpr std::string_view kBearer = "Bearer ";
        bool ok = auth.size() > kBearer.size() &&
                  net::EqualsIgnoreCase(auth.substr(0, kBearer.size()), kBearer) &&
                  SameSecret(auth.substr(kBearer.size()), key);
        if (!ok) {
          net::SendError(*writer, 401, "Unauthorized");
          return;
        }
      }
      handler(*ctx, request, writer);
    });
  };
  route("POST", "/v1/completions", HandleCompletion, false);
  route("POST", "/v1/chat/completions", HandleChatCompletion, false);
  route("GET", "/v1/models", HandleModels, false);
  route("POST", "/tokenize", HandleTokenize, false);
  route("POST", "/detokenize", HandleDetokenize, false);
  route("POST", "/kv_transfer/abort", HandleKvTransferAbort, false);
  route("GET", "/metrics", HandleMetrics, true);
  route(
      "GET", "/health",
      [](ServingContext&, const net::HttpRequest&, const WriterPtr& writer) {
        writer->SendResponse(200, {{"Content-Type", "text/plain"}}, "");
      },
      true);
  route(
      "GET", "/version",
      [](ServingContext&, const net::HttpRequest&, const WriterPtr& writer) {
        net::SendJson(*writer, 200, DumpJson(Json{{"version", TANDEM_VERSION}}));
      },
      true);
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
