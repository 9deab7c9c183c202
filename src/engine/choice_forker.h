// ChoiceForker: parallel sampling's fork (GenerationParams::n > 1). When choice 0 has
// computed its whole prompt, each waiting choice gets the prompt's KV (full blocks
// shared, the partial last block copied) and draws its first token from a copy of the
// same logits row in the same step. A choice that finds no free block for the copy is
// queued to compute the prompt itself (prefix caching still shares the full blocks).
//
// Thread safety: engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/rejection_sampler.h"

namespace tandem {

class KvArena;
class Scheduler;
class SpecDecoder;
struct Request;
namespace kv {
class KvCacheManager;
}

class ChoiceForker {
 public:
  // All borrowed; they outlive the forker. `spec` may be null.
  ChoiceForker(int32_t n_vocab, kv::KvCacheManager* kv, KvArena* arena, Scheduler* scheduler, SpecDecoder* spec)
      : n_vocab_(n_vocab), kv_(kv), arena_(arena), scheduler_(scheduler), spec_(spec) {}

  // A new step: the previous step's row copies go.
  void BeginStep() { rows_.clear(); }
  // `parent` computed its whole prompt this step and `row` ([n_vocab]) is its last
  // logits row: forks it to its waiting choices, appending their draws to `inputs`
  // (rows valid until the next BeginStep).
  void Fork(Request* parent, const float* row, std::vector<SampleInput>* inputs);

 private:
  const int32_t n_vocab_;
  kv::KvCacheManager* kv_;
  KvArena* arena_;
  Scheduler* scheduler_;
  SpecDecoder* spec_;
  std::vector<std::vector<float>> rows_;  // this step's logits copies, [n_vocab] each
};

}  // namespace tandem
