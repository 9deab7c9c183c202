// Golden renders of real chat templates (tests/data/chat_template_golden/*.json, produced by
// tools/make_template_golden.py with Python jinja2 configured as Hugging Face does), plus the
// ChatTemplate input preprocessing.
#include "template/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "template/jinja_value.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

using jinja::Value;

std::string ToJson(const Value& v) {
  std::string out;
  Status s = jinja::AppendJson(v, jinja::JsonFormat(), &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

class ChatTemplateGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTemplateGolden, MatchesJinja2) {
  const std::string name = GetParam();
  std::string text = ReadFileToString(TestDataPath("chat_template_golden/" + name + ".json"));
  ASSERT_FALSE(text.empty()) << "missing golden for " << name;
  StatusOr<Value> doc = jinja::ParseJson(text);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const jinja::DictData& d = doc->dict();
  std::string source = ReadFileToString(TestDataPath(d.Find("template")->str()));
  ASSERT_FALSE(source.empty());
  StatusOr<ChatTemplate> tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ChatContentFormat want_format = d.Find("content_format")->str() == "openai"
                                      ? ChatContentFormat::kOpenAI
                                      : ChatContentFormat::kString;
  EXPECT_EQ(tmpl->detected_content_format(), want_format);

  int passed = 0, total = 0;
  for (const Value& c : d.Find("cases")->list().items) {
    const jinja::DictData& cd = c.dict();
    const std::string& case_name = cd.Find("name")->str();
    ++total;
    ChatRenderInput input;
    input.messages_json = ToJson(*cd.Find("messages"));
    if (!cd.Find("tools")->is_none()) input.tools_json = ToJson(*cd.Find("tools"));
    input.add_generation_prompt = cd.Find("add_generation_prompt")->bool_value();
    input.bos_token = cd.Find("bos_token")->str();
    input.eos_token = cd.Find("eos_token")->str();
    input.extra_kwargs_json = ToJson(*cd.Find("kwargs"));
    input.now_unix_seconds = d.Find("now_unix_seconds")->int_value();
    StatusOr<std::string> got = tmpl->Render(input);
    if (const Value* expected = cd.Find("expected"); expected != nullptr) {
      if (!got.ok()) {
        ADD_FAILURE() << name << "/" << case_name << ": unexpected error "
                      << got.status().ToString();
      } else if (*got != expected->str()) {
        ADD_FAILURE() << name << "/" << case_name << "\nexpected: [" << expected->str()
                      << "]\n     got: [" << *got << "]";
      } else {
        ++passed;
      }
      continue;
    }
    const std::string& error = cd.Find("expected_error")->str();
    if (got.ok()) {
      ADD_FAILURE() << name << "/" << case_name << ": expected error '" << error << "', got ["
                    << *got << "]";
    } else if (cd.Find("error_kind")->str() == "raise" && got.status().message() != error) {
      ADD_FAILURE() << name << "/" << case_name << ": expected raise_exception('" << error
                    << "'), got " << got.status().ToString();
    } else {
      ++passed;
    }
  }
  std::printf("chat template golden %s: %d/%d cases match jinja2\n", name.c_str(), passed, total);
  EXPECT_EQ(passed, total);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, ChatTemplateGolden,
                         ::testing::Values("gemma3", "llama3", "llama3.2", "qwen2.5", "qwen3",
                                           "glm45", "hermes", "glm46", "glm47-flash", "deepseek-v3.1"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.' || ch == '-') ch = '_';
                           }
                           return n;
                         });

constexpr const char* kEcho =
    "{% for m in messages %}{{ m.role }}:{{ m.content }}"
    "{% for c in m.tool_calls or [] %}[{{ c.function.arguments is mapping }}|{{ "
    "c.function.arguments | tojson }}]"
    "{% endfor %};{% endfor %}{{ tools }}|{{ add_generation_prompt }}|{{ foo }}|{{ bos_token }}";

TEST(ChatTemplate, PreprocessesArgumentsAndContent) {
  StatusOr<ChatTemplate> t = ChatTemplate::Parse(kEcho);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->detected_content_format(), ChatContentFormat::kString);
  ChatRenderInput in;
  in.messages_json =
      R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function",)"
      R"("function":{"name":"f","arguments":"{\"x\": [1, 2.0]}"}},)"
      R"({"id":"2","type":"function","function":{"name":"g","arguments":"oops"}}]}])";
  in.add_generation_prompt = false;
  in.bos_token = "<s>";
  in.extra_kwargs_json = R"({"foo": "bar", "add_generation_prompt": true})";
  StatusOr<std::string> r = t->Render(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r,
            "user:a\nb;assistant:None[True|{\"x\": [1, 2.0]}][False|\"oops\"];None|False|bar|<s>");

  in.content_format = ChatContentFormat::kOpenAI;
  in.parse_tool_call_arguments = false;
  r = t->Render(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->substr(0, 20), "user:[{'type': 'text");
  EXPECT_NE(r->find("[False|\"{\\\"x\\\": [1, 2.0]}\"]"), std::string::npos) << *r;
}

TEST(ChatTemplate, RejectsBadInputs) {
  StatusOr<ChatTemplate> t = ChatTemplate::Parse(kEcho);
  ASSERT_TRUE(t.ok());
  ChatRenderInput in;
  in.messages_json = "{}";
  EXPECT_EQ(t->Render(in).status().code(), StatusCode::kInvalidArgument);
  in.messages_json = "[1]";
  EXPECT_EQ(t->Render(in).status().code(), StatusCode::kInvalidArgument);
  in.messages_json = "[";
  EXPECT_EQ(t->Render(in).status().code(), StatusCode::kInvalidArgument);
  in.messages_json = "[]";
  in.tools_json = "{\"a\": 1}";
  EXPECT_EQ(t->Render(in).status().code(), StatusCode::kInvalidArgument);
  in.tools_json = "";
  in.extra_kwargs_json = "[]";
  EXPECT_EQ(t->Render(in).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ChatTemplate::Parse("{% for %}").ok());
}

}  // namespace
}  // namespace tandem
