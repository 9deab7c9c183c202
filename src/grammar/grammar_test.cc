#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_automaton.h"
#include "grammar/grammar_cache.h"
#include "grammar/regex_compiler.h"
#include "grammar/token_trie.h"

namespace tandem::grammar {
namespace {

bool Accepts(GrammarAutomaton& a, std::string_view text) { return a.IsAccepting(a.Advance(a.initial(), text)); }

GrammarAutomaton RegexAutomaton(std::string_view pattern) {
  StatusOr<Grammar> g = CompileSpec({StructuredOutputSpec::Kind::kRegex, std::string(pattern)});
  EXPECT_TRUE(g.ok()) << g.status().message();
  return GrammarAutomaton(std::move(*g));
}

TEST(RegexTest, FullMatchSemantics) {
  GrammarAutomaton a = RegexAutomaton(R"(\d{3}-[a-c]+(x|yz)?)");
  EXPECT_TRUE(Accepts(a, "123-abc"));
  EXPECT_TRUE(Accepts(a, "123-ayz"));
  EXPECT_FALSE(Accepts(a, "12-abc"));
  EXPECT_FALSE(Accepts(a, "123-abd"));
  EXPECT_FALSE(Accepts(a, "123-"));
  EXPECT_EQ(a.Advance(a.initial(), "12a"), kDeadState);
}

TEST(RegexTest, UnicodeClassesAndDot) {
  GrammarAutomaton a = RegexAutomaton("[α-ω]+.");
  EXPECT_TRUE(Accepts(a, "αβγ!"));
  EXPECT_TRUE(Accepts(a, "ω€"));
  EXPECT_FALSE(Accepts(a, "a!"));
  EXPECT_FALSE(Accepts(a, "α\n"));
  // A partial UTF-8 character is alive but not accepted.
  const StateId mid = a.Advance(a.initial(), "\xCE");
  EXPECT_NE(mid, kDeadState);
  EXPECT_FALSE(a.IsAccepting(mid));
}

TEST(RegexTest, NestedNullableRepetitions) {
  GrammarAutomaton a = RegexAutomaton("(a*|b?)*c");
  EXPECT_TRUE(Accepts(a, "c"));
  EXPECT_TRUE(Accepts(a, "aabbac"));
  EXPECT_FALSE(Accepts(a, "aab"));
}

TEST(RegexTest, ErrorsNameTheProblem) {
  for (const char* bad : {"(ab", "a)", "[a-", "*a", "a{3,1}", "(?=x)", R"(\1)", R"(\b)"}) {
    StatusOr<RegexExpr> r = CompileRegex(bad, RegexOptions{});
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(GbnfTest, ParsesLlamaCppStyle) {
  StatusOr<Grammar> g = ParseGbnf(R"(
# a list of small numbers
root ::= "[" ws num ("," ws num)* "]"
num  ::= [1-9] [0-9]{0,2} | "0"
ws   ::= [ \t\n]*
)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  GrammarAutomaton a(std::move(*g));
  EXPECT_TRUE(Accepts(a, "[1, 20,\n 300]"));
  EXPECT_TRUE(Accepts(a, "[0]"));
  EXPECT_FALSE(Accepts(a, "[01]"));
  EXPECT_FALSE(Accepts(a, "[1000]"));
}

TEST(GbnfTest, MultiLineAlternatives) {
  StatusOr<Grammar> g = ParseGbnf("root ::= (\n  \"a\"\n  | \"b\"\n) x\nx ::= \"!\"\n   | \"?\"\n");
  ASSERT_TRUE(g.ok()) << g.status().message();
  GrammarAutomaton a(std::move(*g));
  EXPECT_TRUE(Accepts(a, "a!"));
  EXPECT_TRUE(Accepts(a, "b?"));
  EXPECT_FALSE(Accepts(a, "c!"));
}

TEST(GrammarTest, RefusesRepetitionsThatExpandTooFar) {
  Status s = CompileSpec({StructuredOutputSpec::Kind::kRegex, "((a{1000}){1000}){1000}"}).status();
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

TEST(GbnfTest, Errors) {
  EXPECT_FALSE(ParseGbnf("").ok());
  EXPECT_FALSE(ParseGbnf("root ::= \"a").ok());
  EXPECT_FALSE(ParseGbnf("root ::= undefined").ok());
  EXPECT_FALSE(ParseGbnf("start ::= \"a\"").ok());  // no root
  Status left = ParseGbnf("root ::= root \"a\" | \"b\"").status();
  EXPECT_NE(left.message().find("left-recursive"), std::string::npos) << left.message();
  Status syntax = ParseGbnf("root ::= \"a\"\nfoo bar").status();
  EXPECT_NE(syntax.message().find("line 2"), std::string::npos) << syntax.message();
}

TEST(AutomatonTest, LoopsReturnToTheSameState) {
  GrammarAutomaton a = RegexAutomaton("\"[a-z]*\"");
  const StateId s1 = a.Advance(a.initial(), "\"a");
  EXPECT_EQ(a.Advance(s1, "bcdefgh"), s1);  // right recursion does not grow the stacks
}

TEST(TokenMaskTest, AllowsExactlyTheTokensTheGrammarCanTake) {
  // ids: 0 "a", 1 "ab", 2 "b", 3 "abc", 4 "" (control), 5 eos, 6 "ba"
  std::vector<std::string> pieces = {"a", "ab", "b", "abc", "", "</s>", "ba"};
  TokenTrie trie(pieces, {5});
  GrammarAutomaton a = RegexAutomaton("ab?");
  auto allowed = [&](StateId s) {
    std::shared_ptr<const TokenBitmask> m = a.Mask(s, trie);
    std::vector<int> ids;
    for (int t = 0; t < 7; ++t)
      if (((*m)[t / 64] >> (t % 64)) & 1) ids.push_back(t);
    return ids;
  };
  EXPECT_EQ(allowed(a.initial()), (std::vector<int>{0, 1}));
  const StateId after_a = a.Advance(a.initial(), "a");
  EXPECT_EQ(allowed(after_a), (std::vector<int>{2, 5}));  // "b" or end
  EXPECT_EQ(allowed(a.Advance(after_a, "b")), (std::vector<int>{5}));
  EXPECT_EQ(a.masks_computed(), 3);
  allowed(a.initial());
  EXPECT_EQ(a.masks_computed(), 3);  // cached per state
}

TEST(ThinkingGrammarTest, OptionalAndRequiredThinking) {
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kChoice, R"(["yes", "no"])"};
  spec.thinking = Thinking::kOptional;
  auto g = CompileSpec(spec);
  ASSERT_TRUE(g.ok());
  GrammarAutomaton a(std::move(*g));
  EXPECT_TRUE(Accepts(a, "yes"));  // no thinking: constrained from the start
  EXPECT_TRUE(Accepts(a, "\n<think>any </thi < text</think>no"));
  EXPECT_FALSE(Accepts(a, "<think>a</think>maybe"));
  EXPECT_FALSE(Accepts(a, "maybe"));
  EXPECT_EQ(a.Advance(a.initial(), "<think>x</think>m"), kDeadState);  // the marker ends the thinking
  spec.thinking = Thinking::kRequired;
  auto r = CompileSpec(spec);
  ASSERT_TRUE(r.ok());
  GrammarAutomaton b(std::move(*r));
  EXPECT_TRUE(Accepts(b, "free text</think>yes"));
  EXPECT_TRUE(Accepts(b, "<think>\nhmm</think>no"));
  EXPECT_FALSE(Accepts(b, "yes"));
}

TEST(GrammarCacheTest, SharesCompiledGrammarsAndReportsErrors) {
  GrammarCache cache(2);
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kChoice, R"(["yes", "no"])"};
  auto first = cache.Get(spec);
  auto second = cache.Get(spec);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_TRUE(Accepts(**first, "yes"));
  EXPECT_FALSE(Accepts(**first, "maybe"));
  EXPECT_FALSE(cache.Get({StructuredOutputSpec::Kind::kChoice, "[1]"}).ok());
  EXPECT_FALSE(cache.Get({StructuredOutputSpec::Kind::kRegex, "(("}).ok());
}

TEST(ToolCallGrammarTest, NamedAndRequired) {
  const std::string tools = R"([{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "noop"}}])";
  auto named = CompileSpec({StructuredOutputSpec::Kind::kToolCalls, R"({"name": "get_weather", "tools": )" + tools + "}"});
  ASSERT_TRUE(named.ok()) << named.status().message();
  GrammarAutomaton a(std::move(*named));
  EXPECT_TRUE(Accepts(a, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(a, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  auto required = CompileSpec({StructuredOutputSpec::Kind::kToolCalls, R"({"tools": )" + tools + "}"});
  ASSERT_TRUE(required.ok());
  GrammarAutomaton r(std::move(*required));
  EXPECT_TRUE(Accepts(r, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(r, "hello"));
}

}  // namespace
}  // namespace tandem::grammar
