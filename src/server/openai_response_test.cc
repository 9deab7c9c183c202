#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "template/builtin_chat_templates.h"
#include "template/chat_template.h"

namespace tandem::server {
namespace {

using nlohmann::json;

ResponseContext Context(ApiKind kind, int logprobs = -1) {
  ResponseContext c;
  c.kind = kind;
  c.id = kind == ApiKind::kChat ? "chatcmpl-1" : "cmpl-1";
  c.model = "m";
  c.created = 123;
  c.logprobs = logprobs;
  c.token_text = [](int32_t id) { return "t" + std::to_string(id); };
  return c;
}

RequestOutput Output(std::string text, bool finished = false, std::string reason = "") {
  RequestOutput o;
  o.new_text = std::move(text);
  o.new_tokens = {1};
  o.finished = finished;
  o.finish_reason = std::move(reason);
  return o;
}

TEST(ResponseFormatter, CompletionResponse) {
  ResponseFormatter f(Context(ApiKind::kCompletion));
  f.Append(Output("Hello"));
  f.Append(Output(" world", true, "length"));
  json j = json::parse(f.FinalResponse("length", "null", {5, 2, 0}));
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 123);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["choices"][0]["text"], "Hello world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"].is_null());
  EXPECT_TRUE(j["kv_transfer_params"].is_null());
}

// n > 1: each choice's formatter writes its index; MergeChoices joins the responses.
TEST(ResponseFormatter, ChoicesCarryTheirIndexAndMerge) {
  std::vector<std::string> responses;
  for (int i = 0; i < 2; ++i) {
    ResponseContext c = Context(ApiKind::kChat);
    c.index = i;
    ResponseFormatter f(c);
    std::vector<std::string> chunks = f.StreamChunks(Output("w" + std::to_string(i)), "null", nullptr);
    ASSERT_EQ(chunks.size(), 2u);  // the role chunk, then the text
    for (const std::string& chunk : chunks) EXPECT_EQ(json::parse(chunk)["choices"][0]["index"], i);
    f.Append(Output("w" + std::to_string(i), true, "stop"));
    responses.push_back(f.FinalResponse("stop", "null", {3, 4, 0}));
  }
  json merged = json::parse(MergeChoices(responses));
  ASSERT_EQ(merged["choices"].size(), 2u);
  EXPECT_EQ(merged["choices"][0]["index"], 0);
  EXPECT_EQ(merged["choices"][1]["index"], 1);
  EXPECT_EQ(merged["choices"][1]["message"]["content"], "w1");
  EXPECT_EQ(merged["usage"]["completion_tokens"], 4);
}

TEST(ResponseFormatter, ChatResponseWithCachedTokensAndStopString) {
  ResponseContext c = Context(ApiKind::kChat);
  c.include_cached_tokens = true;
  ResponseFormatter f(c);
  f.Append(Output("Hi", true, "stop"));
  json j = json::parse(f.FinalResponse("stop", "\"END\"", {10, 1, 8}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "END");
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

TEST(ResponseFormatter, ChatStreamChunks) {
  ResponseFormatter f(Context(ApiKind::kChat));
  auto first = f.StreamChunks(Output("He"), "null", nullptr);
  ASSERT_EQ(first.size(), 2u);
  json role = json::parse(first[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(role["choices"][0]["delta"]["content"], "");
  EXPECT_EQ(json::parse(first[1])["choices"][0]["delta"]["content"], "He");
  EXPECT_TRUE(f.StreamChunks(RequestOutput{}, "null", nullptr).empty());  // nothing new
  auto last = f.StreamChunks(Output("", true, "stop"), "13", nullptr);
  ASSERT_EQ(last.size(), 1u);
  json end = json::parse(last[0]);
  EXPECT_EQ(end["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(end["choices"][0]["stop_reason"], 13);
  json usage = json::parse(f.UsageChunk({4, 3, 0}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
}

TEST(ResponseFormatter, CompletionStreamWithContinuousUsage) {
  ResponseFormatter f(Context(ApiKind::kCompletion));
  UsageCounts usage{3, 1, 0};
  auto chunks = f.StreamChunks(Output("a"), "null", &usage);
  ASSERT_EQ(chunks.size(), 1u);
  json j = json::parse(chunks[0]);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "a");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
}

TEST(ResponseFormatter, Logprobs) {
  RequestOutput o = Output("t5t6");
  o.new_tokens = {5, 6};
  o.new_logprobs = {{5, -0.5f, {{5, -0.5f}, {7, -1.0f}}},
                    {6, -std::numeric_limits<float>::infinity(), {}}};
  ResponseFormatter completion(Context(ApiKind::kCompletion, 1));
  json c = json::parse(completion.StreamChunks(o, "null", nullptr)[0])["choices"][0]["logprobs"];
  EXPECT_EQ(c["tokens"], json({"t5", "t6"}));
  EXPECT_EQ(c["text_offset"], json({0, 2}));
  EXPECT_EQ(c["token_logprobs"][1], -9999.0);
  EXPECT_EQ(c["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(c["top_logprobs"][1].size(), 1u);  // the sampled token is always listed
  // Offsets continue across chunks.
  json c2 = json::parse(completion.StreamChunks(o, "null", nullptr)[0])["choices"][0]["logprobs"];
  EXPECT_EQ(c2["text_offset"], json({4, 6}));

  ResponseFormatter chat(Context(ApiKind::kChat, 2));
  chat.Append(o);
  json j = json::parse(chat.FinalResponse("length", "null", {}));
  json content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "t5");
  EXPECT_EQ(content[0]["bytes"], json({116, 53}));
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "t7");
}

TEST(ResponseFormatter, InvalidUtf8DoesNotThrow) {
  ResponseFormatter f(Context(ApiKind::kCompletion));
  f.Append(Output("\xff\xfe ok", true, "length"));
  json j = json::parse(f.FinalResponse("length", "null", {}));
  EXPECT_NE(j["choices"][0]["text"].get<std::string>().find("ok"), std::string::npos);
}

TEST(StopReason, MatchesVllm) {
  GenerationParams p;
  p.stop = {"END", "42"};
  p.stop_token_ids = {13};
  RequestOutput o;
  o.finished = true;
  o.finish_reason = "stop";
  o.stop_reason = "END";
  EXPECT_EQ(StopReasonJson(o, p), "\"END\"");
  o.stop_reason = "42";
  EXPECT_EQ(StopReasonJson(o, p), "\"42\"");  // a stop string that looks like a number
  o.stop_reason = "13";
  EXPECT_EQ(StopReasonJson(o, p), "13");
  o.stop_reason = "1";  // EOS
  EXPECT_EQ(StopReasonJson(o, p), "null");
  o.finish_reason = "length";
  o.stop_reason.clear();
  EXPECT_EQ(StopReasonJson(o, p), "null");
}

TEST(BuiltinChatTemplates, GemmaAndChatMlRender) {
  const std::string messages =
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
      R"({"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}])";
  BuiltinChatTemplate gemma = BuiltinChatTemplateFor("gemma3");
  EXPECT_EQ(gemma.name, "gemma");
  auto g = ChatTemplate::Parse(std::string(gemma.source));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ChatRenderInput in;
  in.messages_json = messages;
  in.bos_token = "<bos>";
  auto text = g->Render(in);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text,
            "<bos><start_of_turn>user\nBe "
            "brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");

  BuiltinChatTemplate chatml = BuiltinChatTemplateFor("llama");
  EXPECT_EQ(chatml.name, "chatml");
  auto c = ChatTemplate::Parse(std::string(chatml.source));
  ASSERT_TRUE(c.ok()) << c.status().message();
  in.messages_json = R"([{"role":"user","content":"Hi"}])";
  auto chat_text = c->Render(in);
  ASSERT_TRUE(chat_text.ok());
  EXPECT_EQ(*chat_text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

std::unique_ptr<parsers::ChatOutputParser> Glm47Parser() {
  parsers::ChatOutputConfig config;
  config.tool_parser = "glm47";
  config.reasoning_parser = "glm45";
  config.tools_json =
      R"([{"type":"function","function":{"name":"get_weather",)"
      R"("parameters":{"type":"object","properties":{"days":{"type":"integer"}}}}}])";
  auto parser = parsers::ChatOutputParser::Create(config);
  EXPECT_TRUE(parser.ok()) << parser.status().message();
  return parser.ok() ? std::move(*parser) : nullptr;
}

constexpr const char* kReply =
    "<think>hmm</think>"
    "<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";

TEST(ResponseFormatter, ChatWithOutputParser) {
  ResponseFormatter f(Context(ApiKind::kChat), Glm47Parser());
  f.Append(Output(std::string(kReply).substr(0, 20)));
  f.Append(Output(std::string(kReply).substr(20), true, "stop"));
  json message = json::parse(f.FinalResponse("stop", "null", {5, 2, 0}))["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["reasoning_content"], "hmm");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"days": 3})"));
  json j = json::parse(f.FinalResponse("stop", "null", {5, 2, 0}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ResponseFormatter, ChatStreamWithOutputParser) {
  ResponseFormatter f(Context(ApiKind::kChat), Glm47Parser());
  std::vector<json> chunks;
  for (const std::string& p :
       f.StreamChunks(Output(std::string(kReply).substr(0, 30)), "null", nullptr)) {
    chunks.push_back(json::parse(p));
  }
  for (const std::string& p :
       f.StreamChunks(Output(std::string(kReply).substr(30), true, "stop"), "null", nullptr)) {
    chunks.push_back(json::parse(p));
  }
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, name, arguments;
  for (const json& c : chunks) {
    const json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls")) {
      const json& fn = d["tool_calls"][0]["function"];
      if (fn.contains("name")) name += fn["name"].get<std::string>();
      if (fn.contains("arguments")) arguments += fn["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(reasoning, "hmm");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), json::parse(R"({"days": 3})"));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
}

}  // namespace
}  // namespace tandem::server
