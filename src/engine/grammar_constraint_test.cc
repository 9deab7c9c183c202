#include "engine/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "grammar/grammar_cache.h"

namespace tandem {
namespace {

using grammar::StructuredOutputSpec;

std::shared_ptr<grammar::GrammarAutomaton> Choice(const std::string& choices) {
  auto g = grammar::CompileSpec({StructuredOutputSpec::Kind::kChoice, choices});
  EXPECT_TRUE(g.ok());
  return std::make_shared<grammar::GrammarAutomaton>(std::move(*g));
}

// ids: 0 "ye", 1 "s", 2 "no", 3 "</think>", 4 "x", 5 eos, 6 "yes"
const std::vector<std::string> kPieces = {"ye", "s", "no", "</think>", "x", "", "yes"};

std::vector<int> Allowed(const GrammarConstraint& c) {
  std::vector<float> logits(kPieces.size(), 1.0f);
  c.ApplyMask(logits.data(), static_cast<int32_t>(logits.size()));
  std::vector<int> ids;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isinf(logits[i])) ids.push_back(static_cast<int>(i));
  return ids;
}

TEST(GrammarConstraintTest, MasksAdvancesAndTerminates) {
  grammar::TokenTrie trie(kPieces, {5});
  GrammarConstraint c(Choice(R"(["yes", "no", "nope"])"), trie);
  EXPECT_EQ(Allowed(c), (std::vector<int>{0, 2, 6}));
  EXPECT_FALSE(c.CanAccept("x"));
  EXPECT_FALSE(c.Accept("x"));  // refused: state unchanged
  EXPECT_TRUE(c.Accept("no"));
  EXPECT_FALSE(c.Terminated());  // "nope" may follow
  EXPECT_EQ(Allowed(c), (std::vector<int>{5}));  // no token spells "pe": only EOS
  GrammarConstraint d(Choice(R"(["yes", "no"])"), trie);
  EXPECT_TRUE(d.Accept("ye"));
  EXPECT_EQ(Allowed(d), (std::vector<int>{1}));
  EXPECT_TRUE(d.Accept("s"));
  EXPECT_TRUE(d.Terminated());
}

}  // namespace
}  // namespace tandem
