#include "proxy/json_span.h"

#include <gtest/gtest.h>

namespace tandem::proxy {
namespace {

TEST(JsonSpanTest, FindsNestedValues) {
  const std::string json =
      R"( {"id":"x","usage" : {"prompt_tokens":7, "prompt_tokens_details":{"cached_tokens":32}},"z":[1,{"a":"}"}]} )";
  EXPECT_EQ(JsonValueText(json, {"id"}).value_or("?"), "\"x\"");
  EXPECT_EQ(JsonValueText(json, {"usage", "prompt_tokens"}).value_or("?"), "7");
  EXPECT_EQ(JsonIntAt(json, {"usage", "prompt_tokens_details", "cached_tokens"}), 32);
  EXPECT_EQ(JsonValueText(json, {"z"}).value_or("?"), R"([1,{"a":"}"}])");
  EXPECT_FALSE(FindJsonValue(json, {"missing"}));
  EXPECT_FALSE(FindJsonValue(json, {"id", "deeper"}));  // a string is no object
}

TEST(JsonSpanTest, SkipsStringsWithEscapesAndBraces) {
  const std::string json = R"({"text":"a \"quoted\" {brace} \\","usage":{"n":1}})";
  EXPECT_EQ(JsonIntAt(json, {"usage", "n"}), 1);
}

TEST(JsonSpanTest, MalformedDocumentsFindNothing) {
  for (const char* bad : {"", "[1,2]", "{", R"({"a":)", R"({"a" 1})", R"({"a":"unterminated)",
                          R"({"a":1,"usage":{"n":)", "not json"}) {
    EXPECT_FALSE(FindJsonValue(bad, {"usage", "n"})) << bad;
  }
  std::string deep(10000, '[');
  EXPECT_FALSE(FindJsonValue(R"({"a":)" + deep + R"(,"b":1})", {"b"}));
}

TEST(JsonSpanTest, ReplacesOnlyCachedTokens) {
  std::string json =
      R"({"choices":[{"text":"cached_tokens"}],"usage":{"prompt_tokens":40,"total_tokens":45,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":40}},"x":1.50})";
  std::string expected = json;
  expected.replace(expected.find(":40}"), 3, ":16");
  ASSERT_TRUE(ReplaceCachedTokens(&json, 16));
  EXPECT_EQ(json, expected);
}

TEST(JsonSpanTest, LeavesNullDetailsAlone) {
  std::string json = R"({"usage":{"prompt_tokens":4,"prompt_tokens_details":null}})";
  const std::string before = json;
  EXPECT_FALSE(ReplaceCachedTokens(&json, 3));
  EXPECT_EQ(json, before);
  std::string no_usage = R"({"choices":[]})";
  EXPECT_FALSE(ReplaceCachedTokens(&no_usage, 3));
}

}  // namespace
}  // namespace tandem::proxy
