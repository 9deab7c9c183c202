// ChatPrompt with tools: `tools`, `tool_choice`, assistant `tool_calls` history and `tool`
// role messages reach the template (the llama fixture's tokenizer; the template is ours).
#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/test_paths.h"

namespace tandem::server {
namespace {

constexpr const char* kToolTemplate =
    "{%- if tools %}[tools:{% for t in tools %} {{ t.function.name }}{% endfor %};"
    " choice: {{ tool_choice | tojson }}]{% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<assistant>"
    "{%- for c in m.tool_calls %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>"
    "{%- endfor %}"
    "{%- elif m.role == 'tool' %}<tool {{ m.tool_call_id }}>{{ m.content }}"
    "{%- else %}<{{ m.role }}>{{ m.content }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<assistant>{% endif %}";

TEST(ChatPrompt, RendersToolsToolChoiceAndToolHistory) {
  auto model = Model::Load(FixturePath("llama.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto prompt = ChatPrompt::FromSource(kToolTemplate, "test", (*model)->tokenizer());
  ASSERT_TRUE(prompt.ok()) << prompt.status().message();
  ChatInputs in;
  in.messages_json =
      R"([{"role":"user","content":"Weather in Paris?"},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
      R"("function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},)"
      R"({"role":"tool","tool_call_id":"call_1","content":"sunny"}])";
  in.tools_json = R"([{"type":"function","function":{"name":"get_weather","parameters":{}}},)"
                  R"({"type":"function","function":{"name":"get_time","parameters":{}}}])";
  in.tool_choice_json = R"({"type":"function","function":{"name":"get_time"}})";
  auto text = (*prompt)->Render(in);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text,
            "[tools: get_weather get_time; choice: {\"type\": \"function\", \"function\": "
            "{\"name\": \"get_time\"}}]<user>Weather in Paris?<assistant>"
            "<call get_weather {\"city\": \"Paris\"}><tool call_1>sunny<assistant>");

  // A tool_choice in chat_template_kwargs wins over the request's.
  in.tool_choice_json = R"("required")";
  in.chat_template_kwargs_json = R"({"tool_choice":"auto"})";
  text = (*prompt)->Render(in);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("choice: \"auto\"]"), std::string::npos) << *text;
}

}  // namespace
}  // namespace tandem::server
