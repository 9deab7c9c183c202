#include "ops/bench_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tandem::ops {
namespace {

// Common words that most tokenizers keep as one token each (with the leading space).
constexpr const char* kWords[] = {
    "the",       "of",      "and",      "to",     "in",      "is",      "that",      "for",
    "it",        "as",      "was",      "with",   "be",      "by",      "on",        "not",
    "he",        "this",    "are",      "or",     "his",     "from",    "at",        "which",
    "but",       "have",    "an",       "had",    "they",    "you",     "were",      "their",
    "one",       "all",     "we",       "can",    "her",     "has",     "there",     "been",
    "if",        "more",    "when",     "will",   "would",   "who",     "so",        "no",
    "time",      "people",  "year",     "way",    "day",     "man",     "thing",     "woman",
    "life",      "child",   "world",    "school", "state",   "family",  "student",   "group",
    "country",   "problem", "hand",     "part",   "place",   "case",    "week",      "company",
    "system",    "program", "question", "work",   "number",  "night",   "point",     "home",
    "water",     "room",    "mother",   "area",   "money",   "story",   "fact",      "month",
    "lot",       "right",   "study",    "book",   "eye",     "job",     "word",      "business",
    "issue",     "side",    "kind",     "head",   "house",   "service", "friend",    "father",
    "power",     "hour",    "game",     "line",   "end",     "member",  "law",       "car",
    "city",      "name",    "team",     "minute", "idea",    "body",    "back",      "parent",
    "face",      "others",  "level",    "office", "door",    "health",  "person",    "art",
    "war",       "history", "party",    "result", "change",  "morning", "reason",    "research",
    "girl",      "guy",     "moment",   "air",    "teacher", "force",   "education", "good",
    "new",       "first",   "last",     "long",   "great",   "little",  "own",       "other",
    "old",       "big",     "high",     "small",  "large",   "next",    "early",     "young",
    "important", "few",     "public",   "bad",    "same",    "able",    "make",      "know",
    "take",      "see",     "come",     "think",  "look",    "want",    "give",      "use",
    "find",      "tell",    "ask",      "seem",   "feel",    "try",     "leave",     "call",
    "river",     "light",   "music",    "green",  "table",   "window",  "garden",    "road",
    "paper",     "train",   "summer",   "winter", "market",  "bridge",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string Words(int n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ' ';
    out += kWords[pick(rng)];
  }
  return out;
}

// A length drawn uniformly from [len * (1 - ratio), len * (1 + ratio)], at least 1.
int Vary(int len, double ratio, std::mt19937_64& rng) {
  if (ratio <= 0) return len;
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - ratio))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + ratio))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

int WordsFor(int tokens, double tokens_per_word) {
  return std::max(1, static_cast<int>(std::lround(tokens / tokens_per_word)));
}

}  // namespace

StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name) {
  if (name == "random") return WorkloadKind::kRandom;
  if (name == "shared-prefix") return WorkloadKind::kSharedPrefix;
  if (name == "multi-turn") return WorkloadKind::kMultiTurn;
  if (name == "quote") return WorkloadKind::kQuote;
  return InvalidArgumentError("unknown workload '" + name +
                              "' (random, shared-prefix, multi-turn, quote)");
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kRandom:
      return "random";
    case WorkloadKind::kSharedPrefix:
      return "shared-prefix";
    case WorkloadKind::kMultiTurn:
      return "multi-turn";
    case WorkloadKind::kQuote:
      return "quote";
  }
  return "?";
}

std::string RandomWords(int num_words, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Words(num_words, rng);
}

StatusOr<std::vector<BenchSession>> BuildWorkload(const WorkloadOptions& o) {
  if (o.num_prompts < 1) return InvalidArgumentError("--num-prompts must be at least 1");
  if (o.input_len < 1 || o.output_len < 1) {
    return InvalidArgumentError("input and output lengths must be at least 1");
  }
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return InvalidArgumentError("--range-ratio must be in [0, 1)");
  }
  if (o.prefix_len < 0) return InvalidArgumentError("--prefix-len must not be negative");
  if (o.num_prefixes < 1) return InvalidArgumentError("--num-prefixes must be at least 1");
  if (o.num_turns < 1) return InvalidArgumentError("--num-turns must be at least 1");
  if (!(o.tokens_per_word > 0)) return InvalidArgumentError("tokens_per_word must be positive");
  std::mt19937_64 rng(o.seed);
  auto turn = [&] {
    BenchTurn t;
    t.user_text = Words(WordsFor(Vary(o.input_len, o.range_ratio, rng), o.tokens_per_word), rng);
    t.output_len = Vary(o.output_len, o.range_ratio, rng);
    return t;
  };
  std::vector<BenchSession> sessions;
  switch (o.kind) {
    case WorkloadKind::kRandom:
      for (int i = 0; i < o.num_prompts; ++i) sessions.push_back({-1, "", {turn()}});
      break;
    case WorkloadKind::kQuote:
      for (int i = 0; i < o.num_prompts; ++i) {
        BenchTurn t = turn();
        t.user_text = "Repeat the following passage exactly, word for word.\n\nPassage: " + t.user_text +
                      "\n\nThe passage, repeated exactly: ";
        sessions.push_back({-1, "", {t}});
      }
      break;
    case WorkloadKind::kSharedPrefix: {
      std::vector<std::string> prefixes;
      for (int g = 0; g < o.num_prefixes; ++g) {
        // The group number first, so groups differ from their first token on.
        prefixes.push_back("group " + std::to_string(g) + ": " +
                           Words(WordsFor(std::max(1, o.prefix_len), o.tokens_per_word), rng));
      }
      for (int i = 0; i < o.num_prompts; ++i) {
        const int g = i % o.num_prefixes;
        sessions.push_back({g, prefixes[g], {turn()}});
      }
      std::shuffle(sessions.begin(), sessions.end(), rng);
      break;
    }
    case WorkloadKind::kMultiTurn:
      for (int left = o.num_prompts; left > 0; left -= o.num_turns) {
        BenchSession s;
        if (o.prefix_len > 0) {
          s.system_prompt = "session " + std::to_string(sessions.size()) + ": " +
                            Words(WordsFor(o.prefix_len, o.tokens_per_word), rng);
        }
        for (int t = 0; t < std::min(left, o.num_turns); ++t) s.turns.push_back(turn());
        sessions.push_back(std::move(s));
      }
      break;
  }
  return sessions;
}

std::vector<double> ArrivalTimes(int count, double request_rate, double burstiness, uint64_t seed) {
  std::vector<double> times(std::max(count, 0), 0.0);
  if (!std::isfinite(request_rate) || request_rate <= 0) return times;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);  // independent of the prompt stream
  // Gamma(shape k, scale theta) has mean k * theta; theta = 1 / (rate * k) keeps the
  // mean gap at 1 / rate whatever the burstiness.
  const double shape = burstiness > 0 ? burstiness : 1.0;
  std::gamma_distribution<double> gap(shape, 1.0 / (request_rate * shape));
  double t = 0;
  for (int i = 0; i < count; ++i) {
    times[i] = t;
    t += gap(rng);
  }
  return times;
}

}  // namespace tandem::ops
