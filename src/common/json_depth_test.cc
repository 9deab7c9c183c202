#include "common/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

std::string Nested(int levels, char open = '[', char close = ']') {
  return std::string(levels, open) + std::string(levels, close);
}

TEST(JsonDepthTest, CountsArraysAndObjects) {
  EXPECT_FALSE(JsonNestingExceeds("{}", 1));
  EXPECT_TRUE(JsonNestingExceeds("{\"a\": []}", 1));
  EXPECT_FALSE(JsonNestingExceeds("{\"a\": []}", 2));
  EXPECT_FALSE(JsonNestingExceeds(Nested(512), 512));
  EXPECT_TRUE(JsonNestingExceeds(Nested(513), 512));
  EXPECT_TRUE(JsonNestingExceeds("{\"a\":" + Nested(600) + "}", 512));
  // Siblings do not add up: depth is the maximum, not the count.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i) siblings += "[[]],";
  siblings += "[]]";
  EXPECT_FALSE(JsonNestingExceeds(siblings, 3));
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  EXPECT_FALSE(JsonNestingExceeds("{\"a\": \"[[[[[[\"}", 1));
  // An escaped quote does not end the string.
  EXPECT_FALSE(JsonNestingExceeds("[\"\\\"[[[[\"]", 1));
  EXPECT_TRUE(JsonNestingExceeds("[\"\\\\\", [[]]]", 2));  // an escaped backslash does
}

TEST(JsonDepthTest, MalformedTextIsHandled) {
  EXPECT_FALSE(JsonNestingExceeds("]]]]{", 1));
  EXPECT_TRUE(JsonNestingExceeds(std::string(3000000, '['), 512));
  EXPECT_FALSE(JsonNestingExceeds("\"unterminated [[[[", 1));
  EXPECT_FALSE(JsonNestingExceeds("", 0));
}

}  // namespace
}  // namespace tandem
