// The request mix of `tandem bench serve`, generated deterministically from a seed.
//
//   random         independent prompts of random words (input_len tokens each,
//                  +-range_ratio), no shared text, so prefix caching cannot help.
//   shared-prefix  num_prefixes groups; every request of a group starts with the same long
//                  system prompt (prefix_len tokens) followed by its own question
//                  (input_len tokens). Requests of the groups are shuffled together.
//   multi-turn     chat sessions of num_turns user turns; each turn sends the whole
//                  conversation so far (an optional system prompt of prefix_len tokens,
//                  earlier user turns and the model's replies) plus a new user message of
//                  input_len tokens. A session's next turn starts when its reply is done.
//   quote          independent prompts that ask for a passage of random words (input_len
//                  tokens) to be repeated word for word: answers that quote their prompt,
//                  where speculative decoding by prompt lookup pays.
//
// Lengths are in tokens of the served model: text is made of common English words and
// `tokens_per_word` (measured with the server's /tokenize when available, else 1.0)
// converts. The prompt lengths the server reports are what the benchmark counts.
//
// Thread safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

enum class WorkloadKind { kRandom, kSharedPrefix, kMultiTurn, kQuote };

// "random", "shared-prefix", "multi-turn", "quote"; InvalidArgument otherwise.
StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name);
const char* WorkloadKindName(WorkloadKind kind);

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kRandom;
  int num_prompts = 100;   // requests in total (all turns of all sessions)
  int input_len = 256;     // tokens of each request's own text (a user turn)
  int output_len = 128;    // max_tokens of each request
  double range_ratio = 0;  // input and output lengths vary uniformly within +-ratio
  int prefix_len = 0;      // tokens of the shared system prompt (shared-prefix, multi-turn)
  int num_prefixes = 4;    // groups (shared-prefix)
  int num_turns = 4;       // user turns per session (multi-turn)
  uint64_t seed = 0;
  double tokens_per_word = 1.0;
};

struct BenchTurn {
  std::string user_text;
  int output_len = 0;
};

// One session: a single request for random and shared-prefix, a conversation for
// multi-turn. `system_prompt` is the shared prefix ("" when none).
struct BenchSession {
  int group = -1;  // shared-prefix group, -1 otherwise
  std::string system_prompt;
  std::vector<BenchTurn> turns;
};

// InvalidArgument for non-positive counts or lengths, or a range_ratio outside [0, 1).
StatusOr<std::vector<BenchSession>> BuildWorkload(const WorkloadOptions& options);

// `count` send times in seconds from the start: gaps drawn from a gamma distribution of
// shape `burstiness` and mean 1 / rate (burstiness 1 is a Poisson process, as vLLM's
// --request-rate/--burstiness). A non-finite or non-positive rate sends all at time 0.
std::vector<double> ArrivalTimes(int count, double request_rate, double burstiness, uint64_t seed);

// `num_words` words drawn by `seed` (a helper for the workload and the calibration).
std::string RandomWords(int num_words, uint64_t seed);

}  // namespace tandem::ops
