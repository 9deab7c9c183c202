// libFuzzer target: chat-template rendering with our Jinja-subset interpreter
// (model/jinja_*, model/chat_template.*). Templates come from model files and messages
// from clients, so both are hostile: any template and any inputs must give text or a
// Status within the render limits, never a crash, a hang, a leak or a stack overflow.
//
// Input: byte 0 picks the mode, byte 1 holds flags, the rest is the payload.
//   mode 0  the payload is a template, rendered with fixed messages, tools and kwargs
//   mode 1  the payload is the messages JSON, rendered with one of the fixed templates
//           (byte 2 picks it; the payload starts at byte 3)
//   mode 2  the payload is "template \0 messages [\0 tools [\0 kwargs]]"
//   flags   bit 0 add_generation_prompt, bits 1-2 content format (auto, string, openai),
//           bit 3 parse_tool_call_arguments off
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "template/chat_template.h"

namespace {

constexpr std::string_view kMessages =
    R"([{"role":"system","content":"Be brief."},)"
    R"({"role":"user","content":[{"type":"text","text":"Weather in Paris?"},{"type":"image"}]},)"
    R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
    R"("function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"n\": [1, 2.5]}"}}]},)"
    R"({"role":"tool","tool_call_id":"call_1","content":"sunny"},)"
    R"({"role":"assistant","content":"<think>ok</think>It is sunny.","reasoning_content":"ok"},)"
    R"({"role":"user","content":"Thanks \u00e9\ud83d\ude00"}])";

constexpr std::string_view kTools =
    R"([{"type":"function","function":{"name":"get_weather","description":"Weather",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

constexpr std::string_view kKwargs = R"({"enable_thinking":false,"tool_choice":"auto"})";

// Small templates in the shapes models ship (ChatML, Gemma turns, a tools loop), for
// mode 1.
constexpr std::string_view kTemplates[] = {
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",

    "{{ bos_token }}{% for m in messages %}{% if m['content'] is string %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] | trim }}<end_of_turn>\n{% else %}{% for part in m['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",

    "{%- if tools %}<tools>{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>{% endif %}"
    "{%- for m in messages %}{%- if m.tool_calls %}{% for c in m.tool_calls %}"
    "<tool_call>{\"name\": {{ c.function.name | tojson }}, \"arguments\": "
    "{{ c.function.arguments | tojson }}}</tool_call>{% endfor %}"
    "{%- elif m.role == 'tool' %}<tool_response>{{ m.content }}</tool_response>"
    "{%- else %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}",

    "{%- set ns = namespace(last_user=-1) %}{%- for m in messages %}{%- if m.role == 'user' %}"
    "{%- set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{%- for m in messages | reverse %}{{ loop.revindex }}:{{ m.role | upper }}"
    "{{ m.content | string | length }}{{ ns.last_user }}{% endfor %}"
    "{{ messages | map(attribute='role') | join(',') }}{{ raise_exception('x') if false }}",
};

std::vector<std::string_view> Split(std::string_view s, char sep, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    size_t at = s.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  parts.push_back(s);
  return parts;
}

void Render(std::string_view source, tandem::ChatRenderInput& input) {
  auto tmpl = tandem::ChatTemplate::Parse(std::string(source));
  if (!tmpl.ok()) return;
  (void)tmpl->Render(input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 3;
  const uint8_t flags = data[1];
  std::string_view payload(reinterpret_cast<const char*>(data + 2), size - 2);

  tandem::ChatRenderInput input;
  input.messages_json = std::string(kMessages);
  input.tools_json = std::string(kTools);
  input.extra_kwargs_json = std::string(kKwargs);
  input.bos_token = "<s>";
  input.eos_token = "</s>";
  input.add_generation_prompt = (flags & 1) != 0;
  switch ((flags >> 1) & 3) {
    case 1:
      input.content_format = tandem::ChatContentFormat::kString;
      break;
    case 2:
      input.content_format = tandem::ChatContentFormat::kOpenAI;
      break;
    default:
      input.content_format = tandem::ChatContentFormat::kAuto;
      break;
  }
  input.parse_tool_call_arguments = (flags & 8) == 0;
  input.now_unix_seconds = 1700000000;
  // The default limits, but less total work, so a slow input costs tens of milliseconds,
  // not seconds (the limits are checked by the same code whatever their values).
  input.limits.max_output_bytes = 1u << 20;
  input.limits.max_loop_iterations = 100'000;
  input.limits.max_work = 2'000'000;

  if (mode == 0) {
    Render(payload, input);
  } else if (mode == 1) {
    if (payload.empty()) return 0;
    const auto& source = kTemplates[static_cast<uint8_t>(payload[0]) % std::size(kTemplates)];
    input.messages_json = std::string(payload.substr(1));
    Render(source, input);
  } else {
    std::vector<std::string_view> parts = Split(payload, '\0', 4);
    if (parts.size() > 1) input.messages_json = std::string(parts[1]);
    if (parts.size() > 2) input.tools_json = std::string(parts[2]);
    if (parts.size() > 3) input.extra_kwargs_json = std::string(parts[3]);
    Render(parts[0], input);
  }
  return 0;
}
