// GrammarConstraint: one request's structured-output state in the engine (docs:
// README "Structured outputs"). It masks the logits before sampling and advances the
// grammar with every token the request emits.
//
// The constraint applies to the whole output (a reasoning model's free <think> block is
// part of the grammar: grammar/thinking_grammar.h). End-of-generation tokens are
// allowed exactly where the grammar may end; when the grammar can take nothing more the
// engine ends the request ("stop").
//
// Draws of a request happen one at a time in token order (speculative drafts are
// verified row by row, each row masked by the state after the tokens accepted before
// it), so a constrained request stays exact with ngram drafts: a draft the grammar
// refuses can never equal the masked draw and is rejected.
//
// Thread safety: used by one request at a time (the engine thread or the compute
// thread drawing for it); the shared automaton is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar_automaton.h"
#include "grammar/token_trie.h"

namespace tandem {

class GrammarConstraint {
 public:
  // `trie` (the model's vocabulary) must outlive the constraint.
  GrammarConstraint(std::shared_ptr<grammar::GrammarAutomaton> automaton, const grammar::TokenTrie& trie);

  // Sets the logits of refused tokens to -inf.
  // Returns false when the grammar allows no token at all (a dead end).
  bool ApplyMask(float* logits, int32_t n_vocab) const;

  // Whether emitting `piece` (the token's bytes) keeps the output in the grammar.
  bool CanAccept(std::string_view piece) const;
  // Advances by an emitted token's bytes. False when the grammar refuses them (the
  // state is then unchanged).
  bool Accept(std::string_view piece);

  // The output so far is complete and nothing can follow.
  bool Terminated() const;

 private:
  std::shared_ptr<grammar::GrammarAutomaton> automaton_;
  const grammar::TokenTrie& trie_;
  grammar::StateId state_;
};

}  // namespace tandem
