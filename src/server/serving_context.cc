#include "server/serving_context.h"

#include "server/structured_output_request.h"

#include <chrono>
#include <cstdio>

#include "common/logging.h"
#include "model/model.h"
#include "server/request_session.h"
#include "server/structured_output_request.h"

namespace tandem::server {

void SendStatus(net::HttpResponseWriter& writer, const Status& status) {
  net::SendError(writer, HttpStatusFor(status), status.message());
}

ServingContext::ServingContext(ServerOptions options, const Model& model, Engine& engine,
                               MetricsRegistry* metrics, std::unique_ptr<ChatPrompt> chat)
    : options_(std::move(options)),
      model_(model),
      engine_(engine),
      metrics_(metrics),
      chat_(std::move(chat)) {
  std::random_device rd;
  id_rng_.seed((uint64_t{rd()} << 32) ^ rd() ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  seed_rng_.seed(options_.seed.value_or(0));
}

const Tokenizer& ServingContext::tokenizer() const { return model_.tokenizer(); }

Status ServingContext::CheckModel(const std::string& model) const {
  if (model.empty()) return Status();
  for (const std::string& name : options_.served_model_names) {
    if (name == model) return Status();
  }
  return NotFoundError("The model `" + model + "` does not exist.");
}

std::string ServingContext::NewRequestId(const char* prefix, const net::HttpRequest& request,
                                         const std::string& body_id) {
  if (auto header = request.headers.Get("X-Request-Id"); header.has_value() && !header->empty()) {
    return std::string(prefix) + std::string(header->substr(0, 256));
  }
  if (!body_id.empty()) return std::string(prefix) + body_id.substr(0, 256);
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    a = id_rng_();
    b = id_rng_();
  }
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return std::string(prefix) + hex;
}

void ServingContext::LogIgnoredFields(const std::vector<std::string>& fields) {
  if (fields.empty()) return;
  std::string fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& f : fields) {
      if (logged_fields_.size() < 1000 && logged_fields_.insert(f).second)
        fresh += (fresh.empty() ? "" : ", ") + f;
    }
  }
  if (!fresh.empty()) {
    TANDEM_LOG(WARNING) << "The following fields were present in the request but ignored: {"
                        << fresh << "} (logged once per field)";
  }
}

StatusOr<std::unique_ptr<parsers::ChatOutputParser>> ServingContext::MakeOutputParser(
    const ChatRequest& request) const {
  const bool forced = !request.tools_json.empty() && (request.tool_choice == ToolChoice::kRequired ||
                                                       request.tool_choice == ToolChoice::kNamed);
  const bool parse_tools =
      forced || (!options_.tool_call_parser.empty() && !request.tools_json.empty() &&
                 request.tool_choice == ToolChoice::kAuto && options_.enable_auto_tool_choice);
  if (!parse_tools && options_.reasoning_parser.empty())
    return std::unique_ptr<parsers::ChatOutputParser>();
  parsers::ChatOutputConfig config;
  config.tool_parser = forced ? "hermes" : parse_tools ? options_.tool_call_parser : "";
  config.reasoning_parser = options_.reasoning_parser;
  config.enable_thinking = request.enable_thinking;
  config.tools_json = parse_tools ? request.tools_json : "";
  return parsers::ChatOutputParser::Create(config);
}

Status ServingContext::PrepareStructuredOutput(const ChatRequest* chat, SamplingRequest* request) const {
  if (chat != nullptr && !chat->tools_json.empty() &&
      (chat->tool_choice == ToolChoice::kRequired || chat->tool_choice == ToolChoice::kNamed)) {
    if (request->structured_output.has_value()) {
      return InvalidArgumentError(request->structured_output_field +
                                  ": cannot be combined with tool_choice \"required\" or a named function");
    }
    request->structured_output = ToolCallSpec(*chat);
    request->structured_output_field = "tool_choice";
  }
  // A reasoning model thinks before the constrained output: glm45/qwen3 replies may open
  // with <think>, deepseek_r1 replies always think (its template opened the block).
  if (chat != nullptr && request->structured_output.has_value() && !options_.reasoning_parser.empty() &&
      chat->enable_thinking) {
    request->structured_output->thinking =
        options_.reasoning_parser == "deepseek_r1" ? grammar::Thinking::kRequired : grammar::Thinking::kOptional;
  }
  TANDEM_RETURN_IF_ERROR(CompileStructuredOutput(grammar_cache_, request));
  return Status();
}

Status ServingContext::CheckChoices(const SamplingRequest& request) const {
  const int n = request.params.n;
  const int seats = engine_.options().max_num_seqs;
  if (n > seats) {
    // Every choice runs at once on the prompt's forked KV: n is bounded by the seats.
    return InvalidArgumentError("n must be at most " + std::to_string(seats) +
                                " (--max-num-seqs), got " + std::to_string(n) + ".");
  }
  if (n > 1 && (request.kv_transfer.do_remote_decode || request.kv_transfer.remote_prefill)) {
    return InvalidArgumentError(
        "n > 1 is not supported with kv_transfer_params (disaggregated prefill); send n = 1");
  }
  return Status();
}

void ServingContext::StartGeneration(
    ApiKind kind, const net::HttpRequest& http, SamplingRequest& request,
    std::vector<int32_t> prompt_tokens, std::optional<int> default_max_tokens,
    const std::shared_ptr<net::HttpResponseWriter>& writer,
    std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers) {
  if (request.truncate_prompt_tokens.has_value()) {
    // vLLM's truncate_prompt_tokens: the last k tokens (-1: max_model_len of them).
    const int64_t k = *request.truncate_prompt_tokens == -1 ? options_.max_model_len
                                                            : *request.truncate_prompt_tokens;
    if (k > options_.max_model_len) {
      return SendStatus(*writer,
                        InvalidArgumentError("truncate_prompt_tokens value (" + std::to_string(k) +
                                             ") is greater than max_model_len (" +
                                             std::to_string(options_.max_model_len) +
                                             "). Please, select a smaller truncation size."));
    }
    if (static_cast<int64_t>(prompt_tokens.size()) > k) {
      prompt_tokens.erase(prompt_tokens.begin(), prompt_tokens.end() - k);
    }
  }
  if (prompt_tokens.empty()) {
    return SendStatus(*writer, InvalidArgumentError("the prompt is empty after tokenization"));
  }
  Status fits = ResolveMaxTokens(static_cast<int>(prompt_tokens.size()), options_.max_model_len,
                                 default_max_tokens, &request);
  if (!fits.ok()) return SendStatus(*writer, fits);
  if (!request.params.has_seed && options_.seed.has_value()) {
    std::lock_guard<std::mutex> lock(mu_);
    request.params.has_seed = true;
    request.params.sampling.seed = seed_rng_();
  }
  if (!options_.scripted_tokens.empty()) request.params.scripted_tokens = options_.scripted_tokens;
  SessionOptions session;
  session.response.kind = kind;
  session.response.id =
      NewRequestId(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-", http, request.request_id);
  session.user = request.user;
  session.response.model = served_model();
  session.response.created = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  session.response.include_cached_tokens = options_.enable_prompt_tokens_details;
  session.response.logprobs = request.params.logprobs;
  const Tokenizer* tokenizer = &model_.tokenizer();
  session.response.token_text = [tokenizer](int32_t id) {
    return tokenizer->TokenToPiece(id, /*special=*/true);
  };
  session.params = request.params;
  session.stream = request.stream;
  session.include_usage = request.include_usage;
  session.continuous_usage = request.continuous_usage;
  session.kv_transfer = request.kv_transfer;
  Status submitted = SubmitGeneration(engine_, std::move(prompt_tokens), std::move(session), writer,
                                      std::move(output_parsers));
  if (!submitted.ok()) {
    if (submitted.code() == StatusCode::kResourceExhausted) {
      TANDEM_LOG(WARNING) << "rejecting a request (503): " << submitted.message();
    }
    SendStatus(*writer, submitted);
  }
}

}  // namespace tandem::server
