#include "template/chat_template.h"

#include "template/jinja_interpreter.h"

namespace tandem {
namespace {

using jinja::Expr;
using jinja::ExprKind;
using jinja::Stmt;
using jinja::StmtList;
using jinja::Value;

// True when `e` names something called `content` (content, x.content, x['content']).
bool NamesContent(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kName:
    case ExprKind::kGetAttr: return e.name == "content";
    case ExprKind::kGetItem:
      return e.args[1]->kind == ExprKind::kLiteral && e.args[1]->literal.is_string() &&
             e.args[1]->literal.str() == "content";
    default: return false;
  }
}

// Like vLLM's content-format detection: a template that loops over message content
// expects the OpenAI list-of-parts form.
bool LoopsOverContent(const StmtList& body) {
  for (const auto& s : body) {
    if (s->kind == jinja::StmtKind::kFor && NamesContent(*s->expr)) return true;
    if (LoopsOverContent(s->body) || LoopsOverContent(s->else_body)) return true;
    for (const auto& [cond, branch] : s->branches) {
      if (LoopsOverContent(branch)) return true;
    }
  }
  return false;
}

// Joins the text parts of list content with "\n" (vLLM's string content format).
Value FlattenContent(const Value& content) {
  if (!content.is_list()) return content;
  std::string text;
  bool first = true;
  for (const Value& part : content.list().items) {
    const Value* piece = nullptr;
    if (part.is_string()) {
      piece = &part;
    } else if (part.is_dict()) {
      const Value* type = part.dict().Find("type");
      if (type != nullptr && type->is_string() && type->str() == "text") piece = part.dict().Find("text");
    }
    if (piece == nullptr || !piece->is_string()) continue;
    if (!first) text += "\n";
    text += piece->str();
    first = false;
  }
  return Value::String(std::move(text));
}

Status PrepareMessages(const Value& messages, bool flatten, bool parse_arguments) {
  for (const Value& message : messages.list().items) {
    if (!message.is_dict()) return InvalidArgumentError("each message must be a JSON object");
    jinja::DictData& m = message.dict();
    if (const Value* content = m.Find("content"); flatten && content != nullptr && content->is_list()) {
      m.Set("content", FlattenContent(*content));
    }
    const Value* calls = m.Find("tool_calls");
    if (!parse_arguments || calls == nullptr || !calls->is_list()) continue;
    for (const Value& call : calls->list().items) {
      const Value* function = call.is_dict() ? call.dict().Find("function") : nullptr;
      if (function == nullptr || !function->is_dict()) continue;
      const Value* arguments = function->dict().Find("arguments");
      if (arguments == nullptr || !arguments->is_string()) continue;
      StatusOr<Value> parsed = jinja::ParseJson(arguments->str());
      if (parsed.ok() && parsed->is_dict()) function->dict().Set("arguments", std::move(parsed).value());
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  TANDEM_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::Parse(source));
  ChatContentFormat detected =
      LoopsOverContent(tmpl.program().body) ? ChatContentFormat::kOpenAI : ChatContentFormat::kString;
  return ChatTemplate(std::make_shared<const std::string>(std::move(source)),
                      std::make_shared<const jinja::Template>(std::move(tmpl)), detected);
}

StatusOr<std::string> ChatTemplate::Render(const ChatRenderInput& input) const {
  StatusOr<Value> messages = jinja::ParseJson(input.messages_json);
  if (!messages.ok()) return messages.status().WithContext("messages");
  if (!messages->is_list()) return InvalidArgumentError("messages must be a JSON array");
  ChatContentFormat format =
      input.content_format == ChatContentFormat::kAuto ? detected_format_ : input.content_format;
  TANDEM_RETURN_IF_ERROR(
      PrepareMessages(*messages, format == ChatContentFormat::kString, input.parse_tool_call_arguments));

  Value tools = Value::None();
  if (!input.tools_json.empty()) {
    StatusOr<Value> parsed = jinja::ParseJson(input.tools_json);
    if (!parsed.ok()) return parsed.status().WithContext("tools");
    if (!parsed->is_list() && !parsed->is_none()) return InvalidArgumentError("tools must be a JSON array");
    tools = std::move(parsed).value();
  }

  Value variables = Value::NewDict();
  if (!input.extra_kwargs_json.empty()) {
    StatusOr<Value> extra = jinja::ParseJson(input.extra_kwargs_json);
    if (!extra.ok()) return extra.status().WithContext("chat template kwargs");
    if (!extra->is_dict()) return InvalidArgumentError("chat template kwargs must be a JSON object");
    for (const auto& [k, v] : extra->dict().entries()) variables.dict().Set(k, v);
  }
  variables.dict().Set("messages", std::move(messages).value());
  variables.dict().Set("tools", std::move(tools));
  variables.dict().Set("documents", Value::None());
  variables.dict().Set("add_generation_prompt", Value::Bool(input.add_generation_prompt));
  variables.dict().Set("bos_token", Value::String(input.bos_token));
  variables.dict().Set("eos_token", Value::String(input.eos_token));

  jinja::RenderOptions options;
  options.limits = input.limits;
  options.now_unix_seconds = input.now_unix_seconds;
  return template_->Render(variables, options);
}

}  // namespace tandem
