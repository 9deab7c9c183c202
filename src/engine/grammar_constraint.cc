#include "engine/grammar_constraint.h"

#include <algorithm>
#include <cmath>

namespace tandem {

GrammarConstraint::GrammarConstraint(std::shared_ptr<grammar::GrammarAutomaton> automaton,
                                     const grammar::TokenTrie& trie)
    : automaton_(std::move(automaton)), trie_(trie), state_(automaton_->initial()) {}

bool GrammarConstraint::ApplyMask(float* logits, int32_t n_vocab) const {
  std::shared_ptr<const grammar::TokenBitmask> mask = automaton_->Mask(state_, trie_);
  const uint64_t* bits = mask->data();
  const int32_t n = std::min(n_vocab, trie_.vocab_size());
  bool any = false;
  for (int32_t w = 0; w * 64 < n; ++w) {
    uint64_t word = bits[w];
    if (word == ~uint64_t{0}) {
      any = true;
      continue;
    }
    const int32_t begin = w * 64, end = std::min(n, begin + 64);
    if (word == 0) {
      std::fill(logits + begin, logits + end, -INFINITY);  // the common case: a whole word refused
      continue;
    }
    any = true;
    for (int32_t t = begin; t < end; ++t, word >>= 1) {
      if (!(word & 1)) logits[t] = -INFINITY;
    }
  }
  for (int32_t t = n; t < n_vocab; ++t) logits[t] = -INFINITY;  // padding rows of the output layer
  return any;
}

bool GrammarConstraint::CanAccept(std::string_view piece) const {
  return automaton_->Advance(state_, piece) != grammar::kDeadState;
}

bool GrammarConstraint::Accept(std::string_view piece) {
  const grammar::StateId next = automaton_->Advance(state_, piece);
  if (next == grammar::kDeadState) return false;
  state_ = next;
  return true;
}

bool GrammarConstraint::Terminated() const {
  return automaton_->IsAccepting(state_) && !automaton_->CanContinue(state_);
}

}  // namespace tandem
