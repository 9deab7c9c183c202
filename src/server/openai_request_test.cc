#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "server/serve_config.h"

namespace tandem::server {
namespace {

constexpr int32_t kVocab = 1000;

Status CompletionStatus(const std::string& body) {
  return ParseCompletionRequest(body, kVocab).status();
}

void ExpectBadRequest(const std::string& body, const std::string& message_part) {
  Status s = CompletionStatus(body);
  EXPECT_FALSE(s.ok()) << body;
  EXPECT_EQ(HttpStatusFor(s), 400) << body;
  EXPECT_NE(s.message().find(message_part), std::string::npos) << body << " -> " << s.message();
}

TEST(ParseCompletion, MapsSamplingFields) {
  auto r =
      ParseCompletionRequest(R"({"model":"m","prompt":"hi","temperature":0.5,"top_p":0.9,"top_k":-1,
      "min_p":0.1,"seed":7,"presence_penalty":1,"frequency_penalty":-1,"repetition_penalty":1.2,
      "stop":"END","stop_token_ids":[3,4],"max_tokens":5,"min_tokens":2,"ignore_eos":true,"logprobs":3,
      "n":1,"skip_special_tokens":false,"user":"u","stream":true,"stream_options":{"include_usage":true},
      "kv_transfer_params":{"do_remote_decode":true,"x":[1,2]},"some_future_field":1})",
                             kVocab);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GenerationParams& p = r->sampling.params;
  EXPECT_EQ(r->sampling.model, "m");
  EXPECT_EQ(r->prompt_text, "hi");
  EXPECT_FALSE(r->prompt_is_tokens);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_TRUE(p.has_seed);
  EXPECT_EQ(p.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(p.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r->sampling.max_tokens, 5);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 3);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_TRUE(r->sampling.stream);
  EXPECT_TRUE(r->sampling.include_usage);
  EXPECT_TRUE(r->sampling.kv_transfer.do_remote_decode);
  EXPECT_FALSE(r->sampling.kv_transfer.remote_prefill.has_value());
  EXPECT_EQ(r->sampling.ignored_fields, std::vector<std::string>{"some_future_field"});
}

TEST(ParseCompletion, DefaultsFollowOpenAi) {
  auto r = ParseCompletionRequest(R"({"prompt":"x","temperature":null})", kVocab);
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(r->sampling.params.sampling.temperature, 1.0f);
  EXPECT_FALSE(r->sampling.max_tokens.has_value());
  EXPECT_EQ(r->sampling.params.logprobs, -1);
  EXPECT_TRUE(r->add_special_tokens);
  EXPECT_FALSE(r->sampling.stream);
}

TEST(ParseCompletion, PromptShapes) {
  auto tokens = ParseCompletionRequest(R"({"prompt":[1,2,3]})", kVocab);
  ASSERT_TRUE(tokens.ok());
  EXPECT_TRUE(tokens->prompt_is_tokens);
  EXPECT_EQ(tokens->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  auto nested = ParseCompletionRequest(R"({"prompt":[[5,6]]})", kVocab);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->prompt_tokens, (std::vector<int32_t>{5, 6}));
  auto list = ParseCompletionRequest(R"({"prompt":["one"]})", kVocab);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->prompt_text, "one");
  ExpectBadRequest(R"({"prompt":["a","b"]})", "several prompts");
  ExpectBadRequest(R"({"prompt":""})", "non-empty");
  ExpectBadRequest(R"({"prompt":[]})", "non-empty");
  ExpectBadRequest(R"({})", "prompt");
  ExpectBadRequest(R"({"prompt":[1,1000]})", "out of vocabulary");
  ExpectBadRequest(R"({"prompt":[-1]})", "out of vocabulary");
  ExpectBadRequest(R"({"prompt":5})", "prompt");
}

TEST(ParseCompletion, RejectsMalformedAndWrongTypes) {
  ExpectBadRequest("{not json", "JSON");
  ExpectBadRequest("[1,2]", "object");
  ExpectBadRequest(R"({"prompt":"x","temperature":"hot"})", "temperature");
  ExpectBadRequest(R"({"prompt":"x","max_tokens":1.5})", "max_tokens");
  ExpectBadRequest(R"({"prompt":"x","stream":"yes"})", "stream");
  ExpectBadRequest(R"({"prompt":"x","stop":[1]})", "stop");
  ExpectBadRequest(R"({"prompt":"x","model":3})", "model");
  ExpectBadRequest(R"({"prompt":"x","kv_transfer_params":"s"})", "kv_transfer_params");
  EXPECT_TRUE(CompletionStatus(R"({"prompt":"x","max_tokens":16.0})").ok());
}

TEST(ParseCompletion, CacheSalt) {
  auto r = ParseCompletionRequest(R"({"prompt":"x","cache_salt":"tenant-a"})", 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sampling.params.cache_salt, "tenant-a");
  ExpectBadRequest(R"({"prompt":"x","cache_salt":""})", "cache_salt");
  ExpectBadRequest(R"({"prompt":"x","cache_salt":7})", "cache_salt");
  EXPECT_TRUE(CompletionStatus(R"({"prompt":"x","cache_salt":null})").ok());
  auto chat = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"cache_salt":"t"})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->sampling.params.cache_salt, "t");
}

TEST(ParseCompletion, ChoicesAndPriority) {
  auto r = ParseCompletionRequest(R"({"prompt":"x","n":3,"priority":-2,"best_of":1})", 1000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sampling.params.n, 3);
  EXPECT_EQ(r->sampling.params.priority, -2);
  EXPECT_TRUE(r->sampling.ignored_fields.empty());
  auto chat =
      ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"n":2,"priority":4})");
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  EXPECT_EQ(chat->sampling.params.n, 2);
  EXPECT_EQ(chat->sampling.params.priority, 4);
}

TEST(ParseCompletion, VllmExtraFields) {
  auto r = ParseCompletionRequest(
      R"({"prompt":"x","include_stop_str_in_output":true,"request_id":"abc","truncate_prompt_tokens":-1,
          "store":false,"tool_choice":"auto"})",
      1000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->sampling.params.include_stop_str_in_output);
  EXPECT_EQ(r->sampling.request_id, "abc");
  EXPECT_EQ(r->sampling.truncate_prompt_tokens, -1);
  // Not fields of a completion (vLLM ignores them too): listed, so the server logs them.
  EXPECT_EQ(r->sampling.ignored_fields, (std::vector<std::string>{"store", "tool_choice"}));
  ExpectBadRequest(R"({"prompt":"x","truncate_prompt_tokens":-2})",
                   "truncate_prompt_tokens must be at least -1");
  ExpectBadRequest(R"({"prompt":"x","include_stop_str_in_output":"yes"})",
                   "include_stop_str_in_output");
}

TEST(ParseChat, ReasoningEffortAndParallelToolCalls) {
  auto r = ParseChatRequest(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low",
      "parallel_tool_calls":false})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->chat_template_kwargs_json, R"({"reasoning_effort":"low"})");
  auto kept =
      ParseChatRequest(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low",
      "chat_template_kwargs":{"reasoning_effort":"high"}})");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->chat_template_kwargs_json, R"({"reasoning_effort":"high"})");
  auto bad =
      ParseChatRequest(R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"})");
  EXPECT_NE(bad.status().message().find("reasoning_effort"), std::string::npos);
  auto serial =
      ParseChatRequest(R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":false,
      "tools":[{"type":"function","function":{"name":"f"}}]})");
  EXPECT_EQ(HttpStatusFor(serial.status()), 400);
  EXPECT_NE(serial.status().message().find("parallel_tool_calls"), std::string::npos);
}

TEST(ParseCompletion, RejectsOutOfRangeValuesWithVllmMessages) {
  ExpectBadRequest(R"({"prompt":"x","temperature":-1})",
                   "temperature must be non-negative, got -1.0.");
  ExpectBadRequest(R"({"prompt":"x","top_p":0})", "top_p must be in (0, 1]");
  ExpectBadRequest(R"({"prompt":"x","top_p":1.5})", "top_p must be in (0, 1], got 1.5.");
  ExpectBadRequest(R"({"prompt":"x","top_k":-2})", "top_k must be 0 (disable), or at least 1");
  ExpectBadRequest(R"({"prompt":"x","min_p":2})", "min_p must be in [0, 1]");
  ExpectBadRequest(R"({"prompt":"x","presence_penalty":3})", "presence_penalty must be in [-2, 2]");
  ExpectBadRequest(R"({"prompt":"x","frequency_penalty":-3})",
                   "frequency_penalty must be in [-2, 2]");
  ExpectBadRequest(R"({"prompt":"x","repetition_penalty":0})",
                   "repetition_penalty must be greater than zero");
  ExpectBadRequest(R"({"prompt":"x","max_tokens":0})", "max_tokens must be at least 1, got 0.");
  ExpectBadRequest(R"({"prompt":"x","min_tokens":-1})",
                   "min_tokens must be greater than or equal to 0");
  ExpectBadRequest(R"({"prompt":"x","logprobs":21})", "greater than max allowed: 20");
  ExpectBadRequest(R"({"prompt":"x","logprobs":-1})", "logprobs must be non-negative");
  ExpectBadRequest(R"({"prompt":"x","n":"2"})", "n: Input should be a valid integer");
  ExpectBadRequest(R"({"prompt":"x","priority":"high"})",
                   "priority: Input should be a valid integer");
  ExpectBadRequest(R"({"prompt":"x","priority":1.5})", "priority: Input should be a valid integer");
  ExpectBadRequest(R"({"prompt":"x","priority":9999999999})", "priority must be a 32-bit integer");
  ExpectBadRequest(R"({"prompt":"x","best_of":0})", "best_of must be at least 1");
  ExpectBadRequest(R"({"prompt":"x","n":0})", "n must be at least 1");
  ExpectBadRequest(R"({"prompt":"x","echo":true})", "echo");
  ExpectBadRequest(R"({"prompt":"x","best_of":2})", "best_of");
  ExpectBadRequest(R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream=True");
}

TEST(ParseChat, MessagesAndChatFields) {
  auto r = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":9,
      "max_completion_tokens":4,"logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":false},
      "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","add_generation_prompt":true})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->messages_json, R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(r->sampling.max_tokens, 4);  // max_completion_tokens wins
  EXPECT_EQ(r->sampling.params.logprobs, 2);
  EXPECT_EQ(r->chat_template_kwargs_json, R"({"enable_thinking":false})");
  EXPECT_FALSE(r->tools_json.empty());
  EXPECT_TRUE(r->add_generation_prompt);
  EXPECT_FALSE(r->add_special_tokens);
  EXPECT_TRUE(r->sampling.ignored_fields.empty());

  auto plain = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"logprobs":true})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->sampling.params.logprobs, 0);
  auto none = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->sampling.params.logprobs, -1);
}

TEST(ParseChat, Rejects) {
  for (const char* body :
       {R"({})", R"({"messages":[]})", R"({"messages":"hi"})", R"({"messages":[1]})",
        R"({"messages":[{"content":"x"}]})",
        R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
        R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":30})",
        R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
        R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]})",
        R"({"messages":[{"role":"user","content":"x"}],"n":0})"}) {
    auto r = ParseChatRequest(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(HttpStatusFor(r.status()), 400) << body;
  }
}

TEST(ParseTokenize, PromptOrMessages) {
  auto p = ParseTokenizeRequest(R"({"prompt":"hello","add_special_tokens":false})");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->is_chat);
  EXPECT_FALSE(p->add_special_tokens);
  auto m = ParseTokenizeRequest(R"({"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->is_chat);
  EXPECT_TRUE(m->add_generation_prompt);
  EXPECT_FALSE(ParseTokenizeRequest("{}").ok());
  auto d = ParseDetokenizeRequest(R"({"tokens":[1,2]})", kVocab);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(ParseDetokenizeRequest(R"({"tokens":[5000]})", kVocab).ok());
  EXPECT_FALSE(ParseDetokenizeRequest(R"({"tokens":"ab"})", kVocab).ok());
}

// Found with fuzz/http_fuzz.cc (a hand-made INT64_MAX max_tokens run through it under
// UBSan): prompt + max_tokens overflowed.
TEST(ResolveMaxTokens, HugeMaxTokensIsTooLargeNotAnOverflow) {
  auto parsed = ParseCompletionRequest(R"({"prompt":"x","max_tokens":9223372036854775807})", 100);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  Status s = ResolveMaxTokens(3, 100, 16, &parsed->sampling);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is too large: 9223372036854775807"), std::string::npos)
      << s.message();
  auto chat = ParseChatRequest(
      R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":9223372036854775807})");
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  EXPECT_FALSE(ResolveMaxTokens(29, 4096, std::nullopt, &chat->sampling).ok());
}

TEST(ResolveMaxTokens, FitsAndVllmMessages) {
  SamplingRequest r;
  ASSERT_TRUE(ResolveMaxTokens(10, 100, 16, &r).ok());
  EXPECT_EQ(r.params.max_tokens, 16);
  ASSERT_TRUE(ResolveMaxTokens(10, 100, std::nullopt, &r).ok());
  EXPECT_EQ(r.params.max_tokens, 90);  // chat: the rest of the context

  r.max_tokens = 95;
  Status s = ResolveMaxTokens(10, 100, 16, &r);
  EXPECT_EQ(HttpStatusFor(s), 400);
  EXPECT_EQ(s.message(),
            "'max_tokens' or 'max_completion_tokens' is too large: 95. This model's maximum "
            "context length is "
            "100 tokens and your request has 10 input tokens (95 > 100 - 10).");
  SamplingRequest long_prompt;
  s = ResolveMaxTokens(150, 100, std::nullopt, &long_prompt);
  EXPECT_EQ(s.message(),
            "This model's maximum context length is 100 tokens. However, your request has 150 "
            "input tokens. "
            "Please reduce the length of the input messages.");
  EXPECT_FALSE(ResolveMaxTokens(100, 100, std::nullopt, &long_prompt).ok());

  SamplingRequest min;
  min.max_tokens = 3;
  min.params.min_tokens = 5;
  EXPECT_FALSE(ResolveMaxTokens(1, 100, 16, &min).ok());
}

TEST(HttpStatusFor, MapsCodes) {
  EXPECT_EQ(HttpStatusFor(InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusFor(UnimplementedError("x")), 400);
  EXPECT_EQ(HttpStatusFor(NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusFor(UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusFor(ResourceExhaustedError("x")), 503);
  EXPECT_EQ(HttpStatusFor(AlreadyExistsError("x")), 409);
  EXPECT_EQ(HttpStatusFor(InternalError("x")), 500);
}

TEST(ServeConfig, JsonFlags) {
  EXPECT_TRUE(ValidateJsonObjectFlag("--kv-transfer-config", R"({"kv_connector":"X"})").ok());
  EXPECT_TRUE(ValidateJsonObjectFlag("--kv-transfer-config", "").ok());
  Status s = ValidateJsonObjectFlag("--speculative-config", "{bad");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--speculative-config"), std::string::npos);
  EXPECT_FALSE(ValidateJsonObjectFlag("--kv-transfer-config", "[1]").ok());
  EXPECT_EQ(JsonObjectKeys(R"({"a":1,"b":2})"), (std::vector<std::string>{"a", "b"}));

  ServeConfig c;
  c.kv_cache_memory = "1GiB";
  c.gpu_memory_utilization = 0.5;
  c.served_model_names = {"name"};
  auto o = MakeEngineOptions(c, {0, 1});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->kv_cache_bytes, int64_t{1} << 29);
  EXPECT_EQ(o->model_name, "name");
  EXPECT_EQ(o->cpu_ids, (std::vector<int>{0, 1}));
  c.gpu_memory_utilization = 1.5;
  EXPECT_FALSE(MakeEngineOptions(c, {}).ok());
}

TEST(ParseChat, ToolChoiceFollowsVllm) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  auto parse = [&](const std::string& rest) { return ParseChatRequest("{" + msgs + rest + "}"); };
  auto r = parse("");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r->enable_thinking);
  r = parse("," + tools);  // tools without tool_choice: "auto"
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(r->tool_choice_json, "");
  r = parse("," + tools +
            R"(,"tool_choice":"required","chat_template_kwargs":{"enable_thinking":false})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(r->tool_choice_json, R"("required")");
  EXPECT_FALSE(r->enable_thinking);
  r = parse("," + tools + R"(,"tool_choice":{"type":"function","function":{"name":"f"}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kNamed);
  r = parse(R"(,"tools":[],"tool_choice":"required")");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kNone);
  r = parse(R"(,"tool_choice":"none")");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tool_choice, ToolChoice::kNone);

  auto bad = [&](const std::string& rest, const std::string& part) {
    Status s = parse(rest).status();
    EXPECT_EQ(HttpStatusFor(s), 400) << rest;
    EXPECT_NE(s.message().find(part), std::string::npos) << rest << " -> " << s.message();
  };
  bad(R"(,"tool_choice":"auto")", "When using `tool_choice`, `tools` must be set.");
  bad("," + tools + R"(,"tool_choice":"sometimes")", "Invalid value for `tool_choice`");
  bad("," + tools + R"(,"tool_choice":{"type":"function"})", "Invalid value for `function`");
  bad("," + tools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})",
      "does not match any of the specified `tools`");
}

}  // namespace
}  // namespace tandem::server
