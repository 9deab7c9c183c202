#include "ops/bench_workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

namespace tandem::ops {
namespace {

int CountWords(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  std::string w;
  while (in >> w) ++n;
  return n;
}

TEST(BenchWorkload, RandomPromptsHaveTheRequestedLengthAndAreDeterministic) {
  WorkloadOptions o;
  o.num_prompts = 20;
  o.input_len = 50;
  o.output_len = 7;
  o.seed = 3;
  auto a = BuildWorkload(o);
  auto b = BuildWorkload(o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 20u);
  std::set<std::string> distinct;
  for (size_t i = 0; i < a->size(); ++i) {
    const BenchSession& s = (*a)[i];
    ASSERT_EQ(s.turns.size(), 1u);
    EXPECT_TRUE(s.system_prompt.empty());
    EXPECT_EQ(CountWords(s.turns[0].user_text), 50);
    EXPECT_EQ(s.turns[0].output_len, 7);
    EXPECT_EQ(s.turns[0].user_text, (*b)[i].turns[0].user_text);
    distinct.insert(s.turns[0].user_text.substr(0, 40));
  }
  EXPECT_EQ(distinct.size(), 20u);  // no shared beginnings
  o.seed = 4;
  EXPECT_NE(BuildWorkload(o).value()[0].turns[0].user_text, (*a)[0].turns[0].user_text);
}

TEST(BenchWorkload, RangeRatioAndTokensPerWord) {
  WorkloadOptions o;
  o.num_prompts = 200;
  o.input_len = 100;
  o.output_len = 100;
  o.range_ratio = 0.5;
  o.tokens_per_word = 2.0;  // 100 tokens -> about 50 words
  auto w = BuildWorkload(o);
  ASSERT_TRUE(w.ok());
  int min_out = 1000, max_out = 0;
  for (const BenchSession& s : *w) {
    const int words = CountWords(s.turns[0].user_text);
    EXPECT_GE(words, 25);
    EXPECT_LE(words, 75);
    min_out = std::min(min_out, s.turns[0].output_len);
    max_out = std::max(max_out, s.turns[0].output_len);
  }
  EXPECT_GE(min_out, 50);
  EXPECT_LE(max_out, 150);
  EXPECT_LT(min_out, 70);  // the range is used
  EXPECT_GT(max_out, 130);
}

TEST(BenchWorkload, SharedPrefixGroupsShareTheirSystemPrompt) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kSharedPrefix;
  o.num_prompts = 12;
  o.num_prefixes = 3;
  o.prefix_len = 200;
  o.input_len = 10;
  auto w = BuildWorkload(o);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 12u);
  std::map<int, std::set<std::string>> prefixes;
  std::map<int, int> counts;
  for (const BenchSession& s : *w) {
    prefixes[s.group].insert(s.system_prompt);
    ++counts[s.group];
    EXPECT_GE(CountWords(s.system_prompt), 200);
  }
  ASSERT_EQ(prefixes.size(), 3u);
  for (auto& [g, set] : prefixes) {
    EXPECT_EQ(set.size(), 1u);
    EXPECT_EQ(counts[g], 4);
  }
  EXPECT_NE(*prefixes[0].begin(), *prefixes[1].begin());
}

TEST(BenchWorkload, MultiTurnSplitsPromptsIntoSessions) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kMultiTurn;
  o.num_prompts = 10;
  o.num_turns = 4;
  o.prefix_len = 20;
  auto w = BuildWorkload(o);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 3u);  // 4 + 4 + 2 turns
  EXPECT_EQ((*w)[0].turns.size(), 4u);
  EXPECT_EQ((*w)[2].turns.size(), 2u);
  EXPECT_FALSE((*w)[0].system_prompt.empty());
  EXPECT_NE((*w)[0].system_prompt, (*w)[1].system_prompt);
}

TEST(BenchWorkload, RejectsBadOptions) {
  WorkloadOptions o;
  o.num_prompts = 0;
  EXPECT_FALSE(BuildWorkload(o).ok());
  o = {};
  o.range_ratio = 1.0;
  EXPECT_FALSE(BuildWorkload(o).ok());
  o = {};
  o.num_turns = 0;
  EXPECT_FALSE(BuildWorkload(o).ok());
  EXPECT_FALSE(ParseWorkloadKind("sharegpt").ok());
  EXPECT_EQ(ParseWorkloadKind("multi-turn").value(), WorkloadKind::kMultiTurn);
  EXPECT_EQ(ParseWorkloadKind("quote").value(), WorkloadKind::kQuote);
  EXPECT_STREQ(WorkloadKindName(WorkloadKind::kQuote), "quote");
}

TEST(BenchWorkload, PoissonArrivalsHaveTheRequestedMeanRate) {
  std::vector<double> t = ArrivalTimes(4000, 20.0, 1.0, 1);
  ASSERT_EQ(t.size(), 4000u);
  EXPECT_EQ(t[0], 0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  const double rate = (t.size() - 1) / t.back();
  EXPECT_NEAR(rate, 20.0, 1.0);
  // Exponential gaps: their standard deviation equals their mean.
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  EXPECT_NEAR(std::sqrt(var / gaps.size()) / mean, 1.0, 0.08);
  EXPECT_EQ(ArrivalTimes(3, 20.0, 1.0, 1), ArrivalTimes(3, 20.0, 1.0, 1));
  for (double x : ArrivalTimes(5, std::numeric_limits<double>::infinity(), 1.0, 1)) EXPECT_EQ(x, 0);
}

}  // namespace
TEST(BenchWorkloadTest, QuotePromptsAskToRepeatTheirOwnPassage) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kQuote;
  o.num_prompts = 3;
  o.input_len = 40;
  auto w = BuildWorkload(o);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->size(), 3u);
  for (const BenchSession& s : *w) {
    ASSERT_EQ(s.turns.size(), 1u);
    const std::string& text = s.turns[0].user_text;
    EXPECT_EQ(text.rfind("Repeat the following passage exactly", 0), 0u) << text;
    EXPECT_NE(text.find("The passage, repeated exactly: "), std::string::npos);
  }
  EXPECT_NE((*w)[0].turns[0].user_text, (*w)[1].turns[0].user_text);
}

}  // namespace tandem::ops
