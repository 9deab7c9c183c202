#include "server/chat_prompt.h"

#include "common/logging.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "server/json_fields.h"
#include "template/builtin_chat_templates.h"

namespace tandem::server {
namespace {

std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  const Vocab& vocab = tokenizer.vocab();
  return id >= 0 && id < vocab.size() ? vocab.tokens[id] : std::string();
}

// For continue_final_message: the rendered text up to the end of the last message's
// content, so generation continues that message (vLLM cuts the same way).
std::string CutAfterFinalMessage(const std::string& rendered, const std::string& messages_json) {
  Json messages = Json::parse(messages_json, nullptr, /*allow_exceptions=*/false);
  if (!messages.is_array() || messages.empty()) return rendered;
  const Json& last = messages.back();
  auto content = last.find("content");
  if (content == last.end() || !content->is_string() || content->get<std::string>().empty())
    return rendered;
  const std::string text = content->get<std::string>();
  size_t pos = rendered.rfind(text);
  if (pos == std::string::npos) {
    // Templates may trim the content; try the trimmed text.
    size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
    if (b == std::string::npos) return rendered;
    std::string trimmed = text.substr(b, e - b + 1);
    pos = rendered.rfind(trimmed);
    if (pos == std::string::npos) return rendered;
    return rendered.substr(0, pos + trimmed.size());
  }
  return rendered.substr(0, pos + text.size());
}

// The template variables from chat_template_kwargs plus `tool_choice` (templates that
// read it see "auto", "none", "required" or the named-function object). A kwarg of the
// same name set by the client wins.
std::string WithToolChoice(const std::string& kwargs_json, const std::string& tool_choice_json) {
  if (tool_choice_json.empty()) return kwargs_json;
  Json kwargs = kwargs_json.empty() ? Json::object() : Json::parse(kwargs_json, nullptr, false);
  if (!kwargs.is_object() || kwargs.contains("tool_choice")) return kwargs_json;
  kwargs["tool_choice"] = Json::parse(tool_choice_json, nullptr, false);
  return DumpJson(kwargs);
}

}  // namespace

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(const Model& model) {
  auto from_gguf = model.source().GetString("tokenizer.chat_template");
  if (from_gguf.ok() && !from_gguf->empty()) {
    TANDEM_LOG(INFO) << "chat template: the model's own (tokenizer.chat_template)";
    return FromSource(std::move(*from_gguf), "gguf", model.tokenizer());
  }
  BuiltinChatTemplate builtin = BuiltinChatTemplateFor(model.config().arch);
  TANDEM_LOG(INFO) << "chat template: the model has none; using the built-in '" << builtin.name
                   << "' template for " << model.config().arch;
  return FromSource(std::string(builtin.source), std::string(builtin.name), model.tokenizer());
}

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::FromSource(std::string source, std::string name,
                                                             const Tokenizer& tokenizer) {
  auto parsed = ChatTemplate::Parse(std::move(source));
  if (!parsed.ok()) {
    return InvalidArgumentError("chat template (" + name +
                                ") does not parse: " + parsed.status().message());
  }
  return std::unique_ptr<ChatPrompt>(
      new ChatPrompt(std::move(*parsed), std::move(name), tokenizer));
}

StatusOr<std::string> ChatPrompt::Render(const ChatInputs& inputs) const {
  ChatRenderInput input;
  input.messages_json = inputs.messages_json;
  input.tools_json = inputs.tools_json;
  input.extra_kwargs_json =
      WithToolChoice(inputs.chat_template_kwargs_json, inputs.tool_choice_json);
  input.add_generation_prompt = inputs.add_generation_prompt && !inputs.continue_final_message;
  input.bos_token = TokenText(tokenizer_, tokenizer_.vocab().bos_id);
  input.eos_token = TokenText(tokenizer_, tokenizer_.vocab().eos_id);
  auto rendered = template_.Render(input);
  if (!rendered.ok()) {
    // Every render failure is the request's fault (bad messages, the template's own
    // raise_exception, or inputs big enough to hit a render limit): a 400.
    return InvalidArgumentError(rendered.status().message());
  }
  if (inputs.continue_final_message) return CutAfterFinalMessage(*rendered, inputs.messages_json);
  return std::move(*rendered);
}

StatusOr<std::vector<int32_t>> ChatPrompt::Encode(const ChatInputs& inputs) const {
  TANDEM_ASSIGN_OR_RETURN(std::string text, Render(inputs));
  return tokenizer_.Encode(text, inputs.add_special_tokens, /*parse_special=*/true);
}

}  // namespace tandem::server
