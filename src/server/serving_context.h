// ServingContext: what the OpenAI handlers share — the options, the model, its
// tokenizer and chat prompt, the engine — plus the small pieces of request plumbing
// every handler needs (request ids, the served-model check, per-request seeds, starting
// a generation).
//
// Ownership: borrows the Model, Engine and MetricsRegistry (all outlive the server);
// owns the ChatPrompt.
// Thread safety: every method may be called from any I/O thread concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "net/http_request.h"
#include "net/http_response_writer.h"
#include "net/http_server.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace tandem {
class MetricsRegistry;
class Model;
class Tokenizer;
}  // namespace tandem

namespace tandem::server {

struct ServerOptions {
  net::HttpServerOptions http;
  std::vector<std::string> served_model_names;  // non-empty; the first names responses
  std::string model_path;                       // "root" in /v1/models
  int max_model_len = 0;                      // > 0: the context limit requests are checked against
  std::string api_key;                        // empty = no authentication
  bool no_auth_health_metrics = false;        // /health, /metrics, /version skip the api_key
  bool enable_prompt_tokens_details = false;  // usage.prompt_tokens_details.cached_tokens
  std::optional<uint64_t> seed;               // --seed: seeds for requests that bring none
  GenerationDefaults generation_defaults;     // --generation-config / --override-generation-config
  bool enable_auto_tool_choice = false;       // --enable-auto-tool-choice
  std::string tool_call_parser;               // --tool-call-parser; empty = none
  std::string reasoning_parser;               // --reasoning-parser; empty = none
  // TEST ONLY (--scripted-output-file): when non-empty every request generates exactly
  // these tokens (GenerationParams::scripted_tokens), whatever the model would say.
  std::vector<int32_t> scripted_tokens;
};

class ServingContext {
 public:
  ServingContext(ServerOptions options, const Model& model, Engine& engine,
                 MetricsRegistry* metrics, std::unique_ptr<ChatPrompt> chat);

  const ServerOptions& options() const { return options_; }
  const Model& model() const { return model_; }
  const Tokenizer& tokenizer() const;
  Engine& engine() const { return engine_; }
  MetricsRegistry* metrics() const { return metrics_; }
  const ChatPrompt& chat() const { return *chat_; }
  const std::string& served_model() const { return options_.served_model_names.front(); }
  // Compiled structured-output grammars, shared by requests with the same spec.
  grammar::GrammarCache& grammar_cache() const { return grammar_cache_; }

  // Compiles the request's structured output (for chat: or the forced tool calls of
  // tool_choice "required" / named) into request->params.grammar. InvalidArgument naming
  // the field for a bad schema, regex or grammar.
  Status PrepareStructuredOutput(const ChatRequest* chat, SamplingRequest* request) const;

  // NotFound with vLLM's message unless `model` is empty or a served name.
  Status CheckModel(const std::string& model) const;

  // "<prefix><X-Request-Id>" when the client sent one, else "<prefix><body_id>" when the
  // body's request_id is set (vLLM's order), else "<prefix><32 hex digits>".
  std::string NewRequestId(const char* prefix, const net::HttpRequest& request,
                           const std::string& body_id = "");

  // Logs (once per field name) request fields that were accepted but ignored.
  void LogIgnoredFields(const std::vector<std::string>& fields);

  // The reasoning/tool-call parser for one chat request, or null when neither
  // --reasoning-parser nor (for this request) a tool parser applies. Tools are parsed
  // when --tool-call-parser is set, the request has tools, and tool_choice is "auto"
  // (needs --enable-auto-tool-choice); and always for "required" or a named function,
  // whose calls a grammar forces in the hermes markup (read by the hermes parser,
  // whatever --tool-call-parser says). InvalidArgument for bad tool schemas.
  StatusOr<std::unique_ptr<parsers::ChatOutputParser>> MakeOutputParser(
      const ChatRequest& request) const;

  // InvalidArgument naming `n` when the request's n cannot be served: more choices than
  // --max-num-seqs seats, or n > 1 with kv_transfer_params. Check before building
  // per-choice state.
  Status CheckChoices(const SamplingRequest& request) const;

  // Validates the length, fills in a seed, and hands the request to the engine; answers
  // the client through `writer` in every case (an error, a stream, or a response).
  // `output_parsers` (chat only: one per choice, or empty) are owned by the request from
  // here on.
  void StartGeneration(ApiKind kind, const net::HttpRequest& http, SamplingRequest& request,
                       std::vector<int32_t> prompt_tokens, std::optional<int> default_max_tokens,
                       const std::shared_ptr<net::HttpResponseWriter>& writer,
                       std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers = {});

 private:
  const ServerOptions options_;
  const Model& model_;
  Engine& engine_;
  MetricsRegistry* const metrics_;
  const std::unique_ptr<ChatPrompt> chat_;
  mutable grammar::GrammarCache grammar_cache_;  // thread-safe

  std::mutex mu_;
  std::mt19937_64 id_rng_;               // guarded by mu_
  std::mt19937_64 seed_rng_;             // guarded by mu_ (only used with --seed)
  std::set<std::string> logged_fields_;  // guarded by mu_
};

// Sends `status` as an OpenAI error with the matching HTTP status.
void SendStatus(net::HttpResponseWriter& writer, const Status& status);

}  // namespace tandem::server
