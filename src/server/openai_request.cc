#include "server/openai_request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "server/json_fields.h"
#include "server/structured_output_request.h"

namespace tandem::server {
namespace {

// Formats a number the way vLLM's Python messages show it ("-1.0", "1.5", "3").
std::string Num(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.1f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

Status Invalid(const std::string& message) { return InvalidArgumentError(message); }

Status ReadStop(JsonFields& fields, GenerationParams* params) {
  const Json* stop = fields.Raw("stop");
  if (stop == nullptr) return Status();
  if (stop->is_string()) {
    if (!stop->get<std::string>().empty()) params->stop.push_back(stop->get<std::string>());
    return Status();
  }
  if (!stop->is_array())
    return Invalid("stop: Input should be a valid string or a list of strings");
  for (const Json& s : *stop) {
    if (!s.is_string()) return Invalid("stop: Input should be a valid string or a list of strings");
    if (!s.get<std::string>().empty()) params->stop.push_back(s.get<std::string>());
  }
  return Status();
}

Status ReadStreamOptions(JsonFields& fields, SamplingRequest* request) {
  const Json* options = fields.Raw("stream_options");
  if (options == nullptr) return Status();
  if (!options->is_object()) return Invalid("stream_options: Input should be a valid dictionary");
  if (!request->stream) return Invalid("Stream options can only be defined when `stream=True`.");
  JsonFields sub(*options);
  std::optional<bool> include_usage, continuous;
  TANDEM_RETURN_IF_ERROR(sub.Bool("include_usage", &include_usage));
  TANDEM_RETURN_IF_ERROR(sub.Bool("continuous_usage_stats", &continuous));
  request->include_usage = include_usage.value_or(false);
  request->continuous_usage = continuous.value_or(false);
  return Status();
}

// The fields both endpoints share; `fields` remembers what was read.
Status ReadSampling(JsonFields& fields, const GenerationDefaults& defaults, SamplingRequest* request) {
  GenerationParams& p = request->params;
  std::optional<std::string> model, user;
  TANDEM_RETURN_IF_ERROR(fields.String("model", &model));
  TANDEM_RETURN_IF_ERROR(fields.String("user", &user));
  request->model = model.value_or("");
  request->user = user.value_or("");

  std::optional<bool> stream, ignore_eos, skip_special, spaces_between;
  TANDEM_RETURN_IF_ERROR(fields.Bool("stream", &stream));
  TANDEM_RETURN_IF_ERROR(fields.Bool("ignore_eos", &ignore_eos));
  TANDEM_RETURN_IF_ERROR(fields.Bool("skip_special_tokens", &skip_special));
  TANDEM_RETURN_IF_ERROR(fields.Bool("spaces_between_special_tokens", &spaces_between));
  request->stream = stream.value_or(false);
  p.ignore_eos = ignore_eos.value_or(false);
  p.skip_special_tokens = skip_special.value_or(true);
  TANDEM_RETURN_IF_ERROR(ReadStreamOptions(fields, request));

  std::optional<double> temperature, top_p, min_p, presence, frequency, repetition;
  TANDEM_RETURN_IF_ERROR(fields.Number("temperature", &temperature));
  TANDEM_RETURN_IF_ERROR(fields.Number("top_p", &top_p));
  TANDEM_RETURN_IF_ERROR(fields.Number("min_p", &min_p));
  TANDEM_RETURN_IF_ERROR(fields.Number("presence_penalty", &presence));
  TANDEM_RETURN_IF_ERROR(fields.Number("frequency_penalty", &frequency));
  TANDEM_RETURN_IF_ERROR(fields.Number("repetition_penalty", &repetition));
  std::optional<int64_t> top_k, seed, n, max_tokens, min_tokens;
  TANDEM_RETURN_IF_ERROR(fields.Integer("top_k", &top_k));
  TANDEM_RETURN_IF_ERROR(fields.Integer("seed", &seed));
  TANDEM_RETURN_IF_ERROR(fields.Integer("n", &n));
  TANDEM_RETURN_IF_ERROR(fields.Integer("max_tokens", &max_tokens));
  TANDEM_RETURN_IF_ERROR(fields.Integer("min_tokens", &min_tokens));

  // OpenAI's (and vLLM's, absent a generation config) default temperature is 1.
  if (!temperature) temperature = defaults.temperature;
  if (!top_p) top_p = defaults.top_p;
  if (!min_p) min_p = defaults.min_p;
  if (!repetition) repetition = defaults.repetition_penalty;
  if (!top_k) top_k = defaults.top_k;
  double t = temperature.value_or(1.0);
  if (!(t >= 0)) return Invalid("temperature must be non-negative, got " + Num(t) + ".");
  double tp = top_p.value_or(1.0);
  if (!(tp > 0 && tp <= 1)) return Invalid("top_p must be in (0, 1], got " + Num(tp) + ".");
  double mp = min_p.value_or(0.0);
  if (!(mp >= 0 && mp <= 1)) return Invalid("min_p must be in [0, 1], got " + Num(mp) + ".");
  double pp = presence.value_or(0.0), fp = frequency.value_or(0.0), rp = repetition.value_or(1.0);
  if (!(pp >= -2 && pp <= 2))
    return Invalid("presence_penalty must be in [-2, 2], got " + Num(pp) + ".");
  if (!(fp >= -2 && fp <= 2))
    return Invalid("frequency_penalty must be in [-2, 2], got " + Num(fp) + ".");
  if (!(rp > 0 && std::isfinite(rp)))
    return Invalid("repetition_penalty must be greater than zero, got " + Num(rp) + ".");
  int64_t k = top_k.value_or(0);
  if (k < -1 || k > (int64_t{1} << 30)) {
    return Invalid("top_k must be 0 (disable), or at least 1, got " + std::to_string(k) + ".");
  }
  if (n.has_value() && *n < 1)
    return Invalid("n must be at least 1, got " + std::to_string(*n) + ".");
  // The upper bound (--max-num-seqs) is the server's (ServingContext::CheckChoices).
  p.n = static_cast<int>(std::min<int64_t>(n.value_or(1), INT32_MAX));
  if (max_tokens.has_value() && *max_tokens < 1) {
    return Invalid("max_tokens must be at least 1, got " + std::to_string(*max_tokens) + ".");
  }
  if (min_tokens.has_value() && *min_tokens < 0) {
    return Invalid("min_tokens must be greater than or equal to 0, got " +
                   std::to_string(*min_tokens) + ".");
  }
  p.sampling.temperature = static_cast<float>(t);
  p.sampling.top_p = static_cast<float>(tp);
  p.sampling.min_p = static_cast<float>(mp);
  p.sampling.top_k = k < 0 ? 0 : static_cast<int>(k);
  p.presence_penalty = static_cast<float>(pp);
  p.frequency_penalty = static_cast<float>(fp);
  p.repetition_penalty = static_cast<float>(rp);
  if (seed.has_value()) {
    p.has_seed = true;
    p.sampling.seed = static_cast<uint64_t>(*seed);
  }
  request->max_tokens = max_tokens;
  if (!max_tokens) request->max_tokens_cap = defaults.max_tokens;
  p.min_tokens = static_cast<int>(std::min<int64_t>(min_tokens.value_or(0), 1 << 30));

  TANDEM_RETURN_IF_ERROR(ReadStop(fields, &p));
  if (const Json* ids = fields.Raw("stop_token_ids")) {
    TANDEM_RETURN_IF_ERROR(ReadTokenIds(*ids, "stop_token_ids", INT32_MAX, &p.stop_token_ids));
  }
  if (const Json* kv = fields.Raw("kv_transfer_params")) {
    if (!kv->is_object()) return Invalid("kv_transfer_params: Input should be a valid dictionary");
    request->kv_transfer = ParseRequestKvTransfer(*kv);
  }
  if (const Json* bias = fields.Raw("logit_bias"); bias != nullptr && !bias->is_null()) {
    if (!bias->is_object()) return Invalid("logit_bias: Input should be a valid dictionary");
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string& key = it.key();
      int64_t id = -1;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (key.empty() || ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX) {
        return Invalid("logit_bias: keys must be token ids, got '" + key + "'");
      }
      if (!it->is_number() || !(it->get<double>() >= -100 && it->get<double>() <= 100)) {
        return Invalid("logit_bias: values must be numbers in [-100, 100], got " + it->dump());
      }
      p.logit_bias.emplace_back(static_cast<int32_t>(id), it->get<float>());
    }
  }
  // vLLM's per-tenant prefix-cache isolation: the salt goes into every block hash of the
  // request, so only requests with the same salt share cached blocks (locally, over PD
  // and in the KV pool, whose keys are those hashes).
  std::optional<std::string> salt;
  TANDEM_RETURN_IF_ERROR(fields.String("cache_salt", &salt));
  if (salt.has_value()) {
    if (salt->empty()) return Invalid("Parameter 'cache_salt' must be a non-empty string if provided.");
    p.cache_salt = std::move(*salt);
  }
  // vLLM's request priority (lower runs first); the engine refuses a nonzero value
  // unless --scheduling-policy priority.
  std::optional<int64_t> priority;
  TANDEM_RETURN_IF_ERROR(fields.Integer("priority", &priority));
  if (priority.has_value()) {
    if (*priority < INT32_MIN || *priority > INT32_MAX) {
      return Invalid("priority must be a 32-bit integer, got " + std::to_string(*priority) + ".");
    }
    p.priority = static_cast<int>(*priority);
  }
  std::optional<bool> include_stop;
  TANDEM_RETURN_IF_ERROR(fields.Bool("include_stop_str_in_output", &include_stop));
  p.include_stop_str_in_output = include_stop.value_or(false);
  std::optional<std::string> request_id;
  TANDEM_RETURN_IF_ERROR(fields.String("request_id", &request_id));
  request->request_id = request_id.value_or("");
  std::optional<int64_t> truncate;
  TANDEM_RETURN_IF_ERROR(fields.Integer("truncate_prompt_tokens", &truncate));
  if (truncate.has_value() && *truncate < -1) {
    return Invalid("truncate_prompt_tokens must be at least -1, got " + std::to_string(*truncate) +
                   ".");
  }
  request->truncate_prompt_tokens = truncate;
  TANDEM_RETURN_IF_ERROR(ReadStructuredOutput(fields, request));
  // Known fields read elsewhere (response_format: structured outputs); unknown ones
  // (tool_choice on completions included) end up in ignored_fields, logged as vLLM does.
  for (const char* known : {"response_format"}) {
    fields.Raw(known);
  }
  return Status();
}

Status CheckLogprobs(int64_t value, const char* name) {
  if (value < 0)
    return Invalid(std::string(name) + " must be non-negative, got " + std::to_string(value) + ".");
  if (value > kMaxLogprobs) {
    return Invalid("Requested sample logprobs of " + std::to_string(value) +
                   ", which is greater than max allowed: " + std::to_string(kMaxLogprobs));
  }
  return Status();
}

Status ReadChatInputs(JsonFields& fields, std::string* messages, std::string* tools,
                      std::string* kwargs) {
  const Json* m = fields.Raw("messages");
  if (m == nullptr) return Invalid("messages: Field required");
  if (!m->is_array()) return Invalid("messages: Input should be a valid list");
  if (m->empty()) return Invalid("messages must contain at least one message");
  for (const Json& message : *m) {
    if (!message.is_object()) return Invalid("messages: each message should be an object");
    auto role = message.find("role");
    if (role == message.end() || !role->is_string())
      return Invalid("messages: each message needs a string 'role'");
    auto content = message.find("content");
    if (content != message.end() && !content->is_string() && !content->is_array() && !content->is_null()) {
      return Invalid("messages: 'content' should be a string or a list of content parts");
    }
  }
  *messages = DumpJson(*m);
  if (const Json* t = fields.Raw("tools")) {
    if (!t->is_array()) return Invalid("tools: Input should be a valid list");
    *tools = DumpJson(*t);
  }
  if (const Json* k = fields.Raw("chat_template_kwargs")) {
    if (!k->is_object()) return Invalid("chat_template_kwargs: Input should be a valid dictionary");
    *kwargs = DumpJson(*k);
  }
  if (fields.Raw("chat_template") != nullptr) {
    return UnimplementedError("a chat_template in the request is not supported");
  }
  return Status();
}

// vLLM's ChatCompletionRequest.check_tool_usage, with its messages.
Status ReadToolChoice(JsonFields& fields, ChatRequest* request) {
  const Json* choice = fields.Raw("tool_choice");
  Json tools = request->tools_json.empty() ? Json(nullptr) : Json::parse(request->tools_json);
  if (choice == nullptr) {
    request->tool_choice =
        tools.is_array() && !tools.empty() ? ToolChoice::kAuto : ToolChoice::kNone;
    return Status();
  }
  request->tool_choice_json = DumpJson(*choice);
  if (choice->is_string() && choice->get<std::string>() == "none") {
    request->tool_choice = ToolChoice::kNone;
    return Status();
  }
  if (tools.is_null()) return Invalid("When using `tool_choice`, `tools` must be set.");
  if (choice->is_string() && choice->get<std::string>() == "auto") {
    request->tool_choice = ToolChoice::kAuto;
    return Status();
  }
  if (choice->is_string() && choice->get<std::string>() == "required") {
    // OpenAI's rule: "required" with no tools behaves like "none".
    request->tool_choice = tools.empty() ? ToolChoice::kNone : ToolChoice::kRequired;
    return Status();
  }
  if (!choice->is_object()) {
    return Invalid("Invalid value for `tool_choice`: " + DumpJson(*choice) +
                   "! Only named tools, \"none\", \"auto\" or \"required\" are supported.");
  }
  const std::string usage =
      " Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
  auto function = choice->find("function");
  if (function == choice->end() || !function->is_object())
    return Invalid("Invalid value for `function` in `tool_choice`!" + usage);
  auto name = function->find("name");
  if (name == function->end() || !name->is_string() || name->get<std::string>().empty())
    return Invalid("Invalid `name` in `function` of `tool_choice`!" + usage);
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    auto f = tool.find("function");
    if (f != tool.end() && f->is_object() && f->value("name", Json()) == *name) {
      request->tool_choice = ToolChoice::kNamed;
      return Status();
    }
  }
  return Invalid("The tool specified in `tool_choice` does not match any of the specified `tools`");
}

}  // namespace

StatusOr<CompletionRequest> ParseCompletionRequest(std::string_view body, int32_t vocab_size,
                                                   const GenerationDefaults& defaults) {
  TANDEM_ASSIGN_OR_RETURN(Json json, ParseJsonObject(body));
  JsonFields fields(json);
  CompletionRequest request;
  TANDEM_RETURN_IF_ERROR(ReadSampling(fields, defaults, &request.sampling));

  const Json* prompt = fields.Raw("prompt");
  if (prompt == nullptr)
    return Invalid("Either prompt or prompt_embeds must be provided and non-empty.");
  const Json* single = prompt;
  if (prompt->is_array() && !prompt->empty() &&
      (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() > 1)
      return UnimplementedError("a list of several prompts is not supported; send one prompt");
    single = &prompt->front();
  }
  if (single->is_string()) {
    request.prompt_text = single->get<std::string>();
    if (request.prompt_text.empty())
      return Invalid("Either prompt or prompt_embeds must be provided and non-empty.");
  } else if (single->is_array()) {
    TANDEM_RETURN_IF_ERROR(ReadTokenIds(*single, "prompt", vocab_size, &request.prompt_tokens));
    if (request.prompt_tokens.empty())
      return Invalid("Either prompt or prompt_embeds must be provided and non-empty.");
    request.prompt_is_tokens = true;
  } else {
    return Invalid(
        "prompt: Input should be a string, a list of token ids, or a list with one of those");
  }

  std::optional<int64_t> logprobs, best_of;
  std::optional<bool> echo, add_special;
  std::optional<std::string> suffix;
  TANDEM_RETURN_IF_ERROR(fields.Integer("logprobs", &logprobs));
  TANDEM_RETURN_IF_ERROR(fields.Integer("best_of", &best_of));
  TANDEM_RETURN_IF_ERROR(fields.Bool("echo", &echo));
  TANDEM_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &add_special));
  TANDEM_RETURN_IF_ERROR(fields.String("suffix", &suffix));
  if (logprobs.has_value()) {
    TANDEM_RETURN_IF_ERROR(CheckLogprobs(*logprobs, "logprobs"));
    request.sampling.params.logprobs = static_cast<int>(*logprobs);
  }
  if (best_of.has_value() && *best_of < 1)
    return Invalid("best_of must be at least 1, got " + std::to_string(*best_of) + ".");
  // vLLM V1 refuses best_of > 1 too ("vLLM V1 does not yet support best_of.").
  if (best_of.value_or(1) > 1)
    return Invalid("best_of > 1 is not supported (as in vLLM V1); use n");
  if (echo.value_or(false)) return UnimplementedError("echo is not supported");
  if (suffix.has_value() && !suffix->empty())
    return UnimplementedError("suffix is not currently supported");
  request.add_special_tokens = add_special.value_or(true);
  request.sampling.ignored_fields = fields.Unread();
  return request;
}

StatusOr<ChatRequest> ParseChatRequest(std::string_view body, const GenerationDefaults& defaults) {
  TANDEM_ASSIGN_OR_RETURN(Json json, ParseJsonObject(body));
  JsonFields fields(json);
  ChatRequest request;
  TANDEM_RETURN_IF_ERROR(ReadSampling(fields, defaults, &request.sampling));
  std::optional<int64_t> max_completion_tokens, top_logprobs;
  TANDEM_RETURN_IF_ERROR(fields.Integer("max_completion_tokens", &max_completion_tokens));
  if (max_completion_tokens.has_value()) {
    if (*max_completion_tokens < 1) {
      return Invalid("max_tokens must be at least 1, got " +
                     std::to_string(*max_completion_tokens) + ".");
    }
    request.sampling.max_tokens = max_completion_tokens;  // preferred over max_tokens
  }
  TANDEM_RETURN_IF_ERROR(ReadChatInputs(fields, &request.messages_json, &request.tools_json,
                                        &request.chat_template_kwargs_json));
  TANDEM_RETURN_IF_ERROR(ReadToolChoice(fields, &request));
  // OpenAI's reasoning_effort reaches the chat template as a variable (as vLLM passes it
  // to templates that read it), unless chat_template_kwargs sets one.
  std::optional<std::string> effort;
  TANDEM_RETURN_IF_ERROR(fields.String("reasoning_effort", &effort));
  if (effort.has_value()) {
    if (*effort != "low" && *effort != "medium" && *effort != "high") {
      return Invalid("reasoning_effort: Input should be 'low', 'medium' or 'high'");
    }
    Json kwargs = request.chat_template_kwargs_json.empty()
                      ? Json::object()
                      : Json::parse(request.chat_template_kwargs_json);
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *effort;
    request.chat_template_kwargs_json = DumpJson(kwargs);
  }
  std::optional<bool> parallel_tool_calls;
  TANDEM_RETURN_IF_ERROR(fields.Bool("parallel_tool_calls", &parallel_tool_calls));
  request.parallel_tool_calls = parallel_tool_calls.value_or(true);
  // Enforced by the forced-call grammar; a free reply (tool_choice auto) may still call
  // several tools, so false is refused there rather than ignored.
  if (!request.parallel_tool_calls && !request.tools_json.empty() && request.tool_choice == ToolChoice::kAuto) {
    return Invalid("parallel_tool_calls: false is supported only with tool_choice \"required\" or a named "
                   "function (a free reply may call several tools)");
  }
  if (!request.chat_template_kwargs_json.empty()) {
    Json kwargs = Json::parse(request.chat_template_kwargs_json);
    auto thinking = kwargs.find("enable_thinking");
    if (thinking != kwargs.end() && thinking->is_boolean())
      request.enable_thinking = thinking->get<bool>();
  }
  std::optional<bool> logprobs, add_generation_prompt, continue_final, add_special, echo;
  TANDEM_RETURN_IF_ERROR(fields.Bool("logprobs", &logprobs));
  TANDEM_RETURN_IF_ERROR(fields.Integer("top_logprobs", &top_logprobs));
  TANDEM_RETURN_IF_ERROR(fields.Bool("add_generation_prompt", &add_generation_prompt));
  TANDEM_RETURN_IF_ERROR(fields.Bool("continue_final_message", &continue_final));
  TANDEM_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &add_special));
  TANDEM_RETURN_IF_ERROR(fields.Bool("echo", &echo));
  if (top_logprobs.has_value()) {
    TANDEM_RETURN_IF_ERROR(CheckLogprobs(*top_logprobs, "top_logprobs"));
    if (!logprobs.value_or(false) && *top_logprobs > 0) {
      return Invalid("when using `top_logprobs`, `logprobs` must be set to true.");
    }
  }
  if (logprobs.value_or(false))
    request.sampling.params.logprobs = static_cast<int>(top_logprobs.value_or(0));
  request.add_generation_prompt = add_generation_prompt.value_or(true);
  request.continue_final_message = continue_final.value_or(false);
  if (request.add_generation_prompt && request.continue_final_message &&
      add_generation_prompt.has_value()) {
    return Invalid("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  }
  if (request.continue_final_message) request.add_generation_prompt = false;
  request.add_special_tokens = add_special.value_or(false);
  if (echo.value_or(false)) return UnimplementedError("echo is not supported");
  request.sampling.ignored_fields = fields.Unread();
  return request;
}

StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body) {
  TANDEM_ASSIGN_OR_RETURN(Json json, ParseJsonObject(body));
  JsonFields fields(json);
  TokenizeRequest request;
  std::optional<std::string> model, prompt;
  std::optional<bool> add_generation_prompt, continue_final, add_special, token_strs;
  TANDEM_RETURN_IF_ERROR(fields.String("model", &model));
  TANDEM_RETURN_IF_ERROR(fields.Bool("add_generation_prompt", &add_generation_prompt));
  TANDEM_RETURN_IF_ERROR(fields.Bool("continue_final_message", &continue_final));
  TANDEM_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &add_special));
  TANDEM_RETURN_IF_ERROR(fields.Bool("return_token_strs", &token_strs));
  request.model = model.value_or("");
  request.return_token_strs = token_strs.value_or(false);
  if (json.contains("messages")) {
    request.is_chat = true;
    TANDEM_RETURN_IF_ERROR(ReadChatInputs(fields, &request.messages_json, &request.tools_json,
                                          &request.chat_template_kwargs_json));
    request.add_generation_prompt = add_generation_prompt.value_or(true);
    request.continue_final_message = continue_final.value_or(false);
    if (request.continue_final_message) request.add_generation_prompt = false;
    request.add_special_tokens = add_special.value_or(false);
  } else {
    TANDEM_RETURN_IF_ERROR(fields.String("prompt", &prompt));
    if (!prompt.has_value()) return Invalid("prompt: Field required (or give messages)");
    request.prompt = *prompt;
    request.add_special_tokens = add_special.value_or(true);
  }
  return request;
}

StatusOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body, int32_t vocab_size) {
  TANDEM_ASSIGN_OR_RETURN(Json json, ParseJsonObject(body));
  JsonFields fields(json);
  DetokenizeRequest request;
  std::optional<std::string> model;
  TANDEM_RETURN_IF_ERROR(fields.String("model", &model));
  request.model = model.value_or("");
  const Json* tokens = fields.Raw("tokens");
  if (tokens == nullptr) return Invalid("tokens: Field required");
  TANDEM_RETURN_IF_ERROR(ReadTokenIds(*tokens, "tokens", vocab_size, &request.tokens));
  return request;
}

Status ResolveMaxTokens(int prompt_tokens, int max_model_len, std::optional<int> default_max_tokens,
                        SamplingRequest* request) {
  const std::string limit =
      "This model's maximum context length is " + std::to_string(max_model_len) + " tokens";
  std::optional<int64_t> max_tokens = request->max_tokens;
  if (!max_tokens.has_value() && default_max_tokens.has_value()) max_tokens = *default_max_tokens;
  if (prompt_tokens > max_model_len ||
      (!max_tokens.has_value() && prompt_tokens >= max_model_len)) {
    return Invalid(limit + ". However, your request has " + std::to_string(prompt_tokens) +
                   " input tokens. Please reduce the length of the input messages.");
  }
  int64_t resolved = max_tokens.value_or(max_model_len - prompt_tokens);
  if (!request->max_tokens.has_value() && request->max_tokens_cap.has_value()) {
    resolved = std::min(resolved, *request->max_tokens_cap);
  }
  // Compared this way round: `resolved` is the client's int64 (up to INT64_MAX), and
  // prompt_tokens + resolved could overflow; max_model_len - prompt_tokens cannot.
  if (resolved > max_model_len - prompt_tokens) {
    const std::string m = std::to_string(resolved);
    const std::string p = std::to_string(prompt_tokens);
    return Invalid("'max_tokens' or 'max_completion_tokens' is too large: " + m + ". " + limit +
                   " and your request has " + p + " input tokens (" + m + " > " +
                   std::to_string(max_model_len) + " - " + p + ").");
  }
  GenerationParams& params = request->params;
  params.max_tokens = static_cast<int>(resolved);
  if (params.min_tokens > params.max_tokens) {
    return Invalid(
        "min_tokens must be less than or equal to max_tokens=" + std::to_string(params.max_tokens) +
        ", got " + std::to_string(params.min_tokens) + ".");
  }
  return Status();
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kFailedPrecondition:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

}  // namespace tandem::server
