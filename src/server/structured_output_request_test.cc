#include "server/structured_output_request.h"

#include <gtest/gtest.h>

namespace tandem::server {
namespace {

using Kind = grammar::StructuredOutputSpec::Kind;

StatusOr<ChatRequest> Chat(const std::string& extra) {
  return ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}])" + extra + "}");
}

TEST(StructuredOutputRequest, ReadsEveryForm) {
  struct Case {
    const char* extra;
    Kind kind;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {R"(,"response_format":{"type":"json_object"})", Kind::kJsonObject, "response_format"},
           {R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"integer"}}})",
            Kind::kJsonSchema, "response_format.json_schema.schema"},
           {R"(,"structured_outputs":{"json":"{\"type\":\"null\"}"})", Kind::kJsonSchema, "structured_outputs.json"},
           {R"(,"structured_outputs":{"regex":"a+"})", Kind::kRegex, "structured_outputs.regex"},
           {R"(,"structured_outputs":{"choice":["a","b"]})", Kind::kChoice, "structured_outputs.choice"},
           {R"(,"structured_outputs":{"grammar":"root ::= \"a\""})", Kind::kGrammar, "structured_outputs.grammar"},
           {R"(,"guided_json":{"type":"string"})", Kind::kJsonSchema, "guided_json"},
           {R"(,"guided_regex":"x")", Kind::kRegex, "guided_regex"},
           {R"(,"guided_choice":["x"])", Kind::kChoice, "guided_choice"},
           {R"(,"guided_grammar":"root ::= \"a\"")", Kind::kGrammar, "guided_grammar"},
       }) {
    auto r = Chat(c.extra);
    ASSERT_TRUE(r.ok()) << c.extra << ": " << r.status().message();
    ASSERT_TRUE(r->sampling.structured_output.has_value()) << c.extra;
    EXPECT_EQ(r->sampling.structured_output->kind, c.kind) << c.extra;
    EXPECT_EQ(r->sampling.structured_output_field, c.field);
    EXPECT_TRUE(r->sampling.ignored_fields.empty());
    grammar::GrammarCache cache;
    EXPECT_TRUE(CompileStructuredOutput(cache, &r->sampling).ok()) << c.extra;
    EXPECT_NE(r->sampling.params.grammar, nullptr);
  }
  auto text = Chat(R"(,"response_format":{"type":"text"})");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->sampling.structured_output.has_value());
}

// disable_any_whitespace / disable_additional_properties set the JSON grammar's options
// (vLLM's meanings); disable_fallback has one backend and nothing to fall back to.
TEST(StructuredOutputRequest, JsonOptionsAreHonoured) {
  auto parse = [](const std::string& so) {
    auto r = Chat(R"(,"structured_outputs":{"json":{"type":"object","properties":{"a":{"type":"integer"}}})" + so +
                  "}");
    EXPECT_TRUE(r.ok()) << so << ": " << r.status().message();
    return r.ok() ? r->sampling : SamplingRequest{};
  };
  auto accepts = [](SamplingRequest s, const char* text) {
    grammar::GrammarCache cache;
    EXPECT_TRUE(CompileStructuredOutput(cache, &s).ok());
    grammar::GrammarAutomaton& a = *s.params.grammar;
    return a.IsAccepting(a.Advance(a.initial(), text));
  };
  const SamplingRequest plain = parse("");
  EXPECT_FALSE(plain.structured_output->json.any_whitespace);
  EXPECT_TRUE(accepts(plain, R"({"a": 1})"));
  EXPECT_FALSE(accepts(plain, "{ \"a\": 1 }"));
  EXPECT_FALSE(accepts(plain, R"({"a": 1, "b": 2})"));
  const SamplingRequest spaced = parse(R"(,"disable_any_whitespace":false)");
  EXPECT_TRUE(spaced.structured_output->json.any_whitespace);
  EXPECT_TRUE(accepts(spaced, "{\n  \"a\" : 1\n}"));
  EXPECT_FALSE(accepts(parse(R"(,"disable_any_whitespace":true)"), "{ \"a\": 1 }"));
  EXPECT_TRUE(accepts(parse(R"(,"disable_additional_properties":false)"), R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(accepts(parse(R"(,"disable_additional_properties":true)"), R"({"a": 1, "b": 2})"));
  for (const char* v : {"true", "false"}) {
    const SamplingRequest s = parse(std::string(R"(,"disable_fallback":)") + v);
    EXPECT_TRUE(accepts(s, R"({"a": 1})")) << v;
  }
  // The same JSON options reach json_object.
  auto object = Chat(R"(,"structured_outputs":{"json_object":true,"disable_any_whitespace":false})");
  ASSERT_TRUE(object.ok());
  EXPECT_TRUE(accepts(object->sampling, "{ \"k\" : 1 }"));
  Status bad = Chat(R"(,"structured_outputs":{"json_object":true,"disable_any_whitespace":"no"})").status();
  EXPECT_NE(bad.message().find("structured_outputs.disable_any_whitespace"), std::string::npos) << bad.message();
}

TEST(StructuredOutputRequest, ErrorsNameTheField) {
  for (auto [extra, field] : std::vector<std::pair<const char*, const char*>>{
           {R"(,"response_format":{"type":"yaml"})", "response_format.type"},
           {R"(,"response_format":{"type":"json_schema"})", "response_format.json_schema"},
           {R"(,"response_format":{"type":"json_schema","json_schema":{"schema":3}})", "response_format.json_schema"},
           {R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{},"extra":1}})",
            "response_format.json_schema.extra"},
           {R"(,"structured_outputs":{"regex":1})", "structured_outputs.regex"},
           {R"(,"structured_outputs":{"choice":[1]})", "structured_outputs.choice"},
           {R"(,"structured_outputs":{"structural_tag":"x"})", "structured_outputs.structural_tag"},
           {R"(,"guided_regex":"a","guided_choice":["a"])", "only one kind"},
       }) {
    Status s = Chat(extra).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << extra;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  }
  auto r = Chat(R"(,"structured_outputs":{"regex":"(a"})");
  ASSERT_TRUE(r.ok());
  grammar::GrammarCache cache;
  Status s = CompileStructuredOutput(cache, &r->sampling);
  EXPECT_EQ(s.message().rfind("structured_outputs.regex: invalid regex", 0), 0u) << s.message();
}

TEST(StructuredOutputRequest, ForcedToolCalls) {
  auto r = Chat(R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],)"
                R"("tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->parallel_tool_calls);
  grammar::StructuredOutputSpec spec = ToolCallSpec(*r);
  EXPECT_EQ(spec.kind, Kind::kToolCalls);
  EXPECT_NE(spec.text.find(R"("name":"f")"), std::string::npos) << spec.text;
}

}  // namespace
}  // namespace tandem::server
