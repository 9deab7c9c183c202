#include "proxy/pd_bodies.h"

#include <gtest/gtest.h>

namespace tandem::proxy {
namespace {

Json Parse(const std::string& s) { return Json::parse(s); }

TEST(PdBodiesTest, PrefillBodyAsksForOneTokenWithoutStreaming) {
  Json client = Parse(
      R"({"model":"m","prompt":"hi","stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"min_tokens":3,"temperature":0})");
  Json body = Parse(PrefillBody(client));
  EXPECT_EQ(body["stream"], false);
  EXPECT_EQ(body["max_tokens"], 1);
  EXPECT_EQ(body["min_tokens"], 1);
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("max_completion_tokens"));
  EXPECT_EQ(body["prompt"], "hi");
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["kv_transfer_params"],
            Parse(R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,
                      "remote_block_ids":null,"remote_host":null,"remote_port":null})"));
  // Keys keep the client's order.
  EXPECT_EQ(body.begin().key(), "model");
}

TEST(PdBodiesTest, PrefillBodySetsMaxCompletionTokensOnlyWhenPresent) {
  Json body = Parse(PrefillBody(Parse(R"({"messages":[],"max_completion_tokens":9})")));
  EXPECT_EQ(body["max_completion_tokens"], 1);
  EXPECT_EQ(body["max_tokens"], 1);
  EXPECT_FALSE(body.contains("min_tokens"));
}

TEST(PdBodiesTest, DecodeBodySplicesTheParamsVerbatim) {
  const std::string raw = "{\"prompt\": \"a b\",  \"max_tokens\": 5.0 }\n";
  const std::string kv =
      R"({"do_remote_prefill": true, "remote_block_ids": [1, 2], "remote_request_id": "r1"})";
  std::string body = DecodeBody(raw, Parse(raw), kv);
  EXPECT_EQ(body,
            "{\"prompt\": \"a b\",  \"max_tokens\": 5.0 ,\"kv_transfer_params\":" + kv + "}\n");
  EXPECT_EQ(Parse(body)["kv_transfer_params"]["remote_request_id"], "r1");
  // No params: the client's bytes unchanged.
  EXPECT_EQ(DecodeBody(raw, Parse(raw), ""), raw);
  // An empty object gets no leading comma.
  EXPECT_EQ(DecodeBody("{ }", Parse("{}"), "{}"), R"({ "kv_transfer_params":{}})");
}

TEST(PdBodiesTest, DecodeBodyReplacesTheClientsOwnParams) {
  const std::string raw = R"({"prompt":"x","kv_transfer_params":{"mine":1}})";
  Json body = Parse(DecodeBody(raw, Parse(raw), R"({"theirs":2})"));
  EXPECT_EQ(body["kv_transfer_params"], Parse(R"({"theirs":2})"));
  EXPECT_EQ(body.size(), 2u);
}

TEST(PdBodiesTest, EstimatesPromptTokens) {
  EXPECT_EQ(EstimatePromptTokens(Parse(R"({"prompt":"12345678"})")), 2);
  EXPECT_EQ(EstimatePromptTokens(Parse(R"({"prompt":"123456789"})")), 3);
  EXPECT_EQ(EstimatePromptTokens(Parse(R"({"prompt":[1,2,3,4,5]})")), 5);
  EXPECT_EQ(EstimatePromptTokens(Parse(R"({"prompt":[[1,2],[3]]})")), 3);
  EXPECT_EQ(EstimatePromptTokens(Parse(R"({"prompt":""})")), 1);
  EXPECT_EQ(
      EstimatePromptTokens(Parse(
          R"({"messages":[{"role":"user","content":"12345678"},{"role":"user","content":[{"type":"text","text":"1234"}]}]})")),
      7);  // (8 + 4 + 2 * 8) / 4
  EXPECT_EQ(MaxNewTokens(Parse(R"({"max_tokens":7})"), 16), 7);
  EXPECT_EQ(MaxNewTokens(Parse(R"({"max_completion_tokens":9})"), 16), 9);
  EXPECT_EQ(MaxNewTokens(Parse(R"({})"), 16), 16);
}

TEST(PdBodiesTest, ContinuesACompletion) {
  auto next =
      ContinuationBody(Parse(R"({"prompt":"Once","max_tokens":10,"min_tokens":2,"echo":true})"),
                       false, " upon a", 2);
  ASSERT_TRUE(next);
  EXPECT_EQ((*next)["prompt"], "Once upon a");
  EXPECT_EQ((*next)["max_tokens"], 8);
  EXPECT_EQ((*next)["min_tokens"], 0);
  EXPECT_FALSE(next->contains("echo"));
  auto floor = ContinuationBody(Parse(R"({"prompt":["x"],"max_tokens":3})"), false, "abc", 5);
  ASSERT_TRUE(floor);
  EXPECT_EQ((*floor)["prompt"], "xabc");
  EXPECT_EQ((*floor)["max_tokens"], 1);
  EXPECT_FALSE(ContinuationBody(Parse(R"({"prompt":[1,2,3]})"), false, "abc", 1));
  EXPECT_FALSE(ContinuationBody(Parse(R"({"prompt":["a","b"]})"), false, "abc", 1));
}

TEST(PdBodiesTest, ContinuesAChat) {
  auto next = ContinuationBody(
      Parse(R"({"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":10})"), true,
      "Hello", 1);
  ASSERT_TRUE(next);
  EXPECT_EQ((*next)["messages"].size(), 2u);
  EXPECT_EQ((*next)["messages"][1], Parse(R"({"role":"assistant","content":"Hello"})"));
  EXPECT_EQ((*next)["continue_final_message"], true);
  EXPECT_EQ((*next)["add_generation_prompt"], false);
  EXPECT_EQ((*next)["max_completion_tokens"], 9);
  // A second continuation extends the same assistant message.
  auto again = ContinuationBody(*next, true, " there", 1);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)["messages"].size(), 2u);
  EXPECT_EQ((*again)["messages"][1]["content"], "Hello there");
}

// Found with fuzz/http_fuzz.cc (hand-made extreme bounds run through it under UBSan): the
// bounds are the client's int64s, and shrinking INT64_MIN (or adding INT64_MAX to a prompt
// estimate) overflowed.
TEST(PdBodiesTest, ExtremeTokenBoundsDoNotOverflow) {
  auto next = ContinuationBody(
      Parse(R"({"prompt":"x","max_tokens":-9223372036854775808,)"
            R"("max_completion_tokens":9223372036854775807,"min_tokens":-9223372036854775808})"),
      false, "abc", 3);
  ASSERT_TRUE(next);
  EXPECT_EQ((*next)["max_tokens"], 1);
  EXPECT_EQ((*next)["max_completion_tokens"], 9223372036854775804);
  EXPECT_EQ((*next)["min_tokens"], 0);
  EXPECT_EQ(MaxNewTokens(Parse(R"({"max_tokens":9223372036854775807})"), 16),
            kMaxNewTokensEstimate);
  EXPECT_EQ(MaxNewTokens(Parse(R"({"max_tokens":-9223372036854775808})"), 16), 1);
  EXPECT_EQ(MaxNewTokens(Parse(R"({"max_tokens":18446744073709551615})"), 16), 1);
}

// Json::value(key, default) throws for a value of another type: the client's
// continue_final_message and role may be anything.
TEST(PdBodiesTest, ContinuationOfOddlyTypedChatFields) {
  auto next = ContinuationBody(
      Parse(R"({"messages":[{"role":5,"content":"a"}],"continue_final_message":"yes"})"), true,
      "b", 1);
  ASSERT_TRUE(next);
  ASSERT_EQ((*next)["messages"].size(), 2u);
  EXPECT_EQ((*next)["messages"][1]["content"], "b");
}

TEST(PdBodiesTest, ParseClientBodyRejectsNonObjects) {
  EXPECT_EQ(ParseClientBody("{bad").status().code(), StatusCode::kInvalidArgument);
  // Found by fuzz/http_fuzz.cc: a number past double's range threw out_of_range, which
  // escaped the parse_error handler (the client got a 500 for a malformed body).
  EXPECT_EQ(ParseClientBody(R"({"prompt":[11e308]})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseClientBody("[1]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseClientBody(R"({"a":1})").ok());
}

}  // namespace
}  // namespace tandem::proxy
