// GrammarAutomaton: runs a Grammar over bytes and computes the per-step token masks.
//
// A matcher state is the set of parse stacks still alive (an Earley-style stack set, as
// llama.cpp's grammar engine keeps), each stack hash-consed into shared nodes so equal
// stacks are one id, and each set of stacks interned as one StateId. The byte
// transitions between states are memoized, so after warm-up advancing by a byte is one
// table look-up, and a state seen once never recomputes its mask:
//   * Mask(state) walks the vocabulary's TokenTrie in preorder from `state`, skipping a
//     whole subtree at the first byte the grammar refuses, and caches the bitmask per
//     state (bounded; shared by every request using this grammar, so 16 requests with
//     one schema compute each mask once).
//   * End-of-generation tokens are allowed exactly where the grammar may end.
// A state is never freed (ids stay valid as long as the automaton lives); the compile
// cache (grammar_cache.h) bounds how many automata live.
//
// Right recursion (how repetitions are lowered) does not grow stacks: a continuation
// that would only return is replaced by its parent (tail call), so a loop such as the
// characters of a JSON string comes back to the same state after every character.
//
// Thread safety: every public method is thread-safe (one mutex; engines draw for many
// requests on several threads).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"

namespace tandem::grammar {

using StateId = int32_t;
inline constexpr StateId kDeadState = 0;  // no stack alive: the input so far is refused

// One bit per token id: bit set = allowed.
using TokenBitmask = std::vector<uint64_t>;

class GrammarAutomaton {
 public:
  explicit GrammarAutomaton(Grammar grammar);

  StateId initial() const { return initial_; }
  // The state after `bytes` from `state` (kDeadState once refused).
  StateId Advance(StateId state, std::string_view bytes);
  // True when the input so far is a complete sentence of the grammar.
  bool IsAccepting(StateId state);
  // True when some byte can still follow.
  bool CanContinue(StateId state);

  // Allowed tokens at `state`. Precondition: the same `trie` for every call on this
  // automaton (one vocabulary per process).
  std::shared_ptr<const TokenBitmask> Mask(StateId state, const TokenTrie& trie);

  const Grammar& grammar() const { return grammar_; }
  int64_t num_states();
  int64_t masks_computed();

 private:
  struct Node {
    int32_t pos;     // element to match next (a terminal for stack tops)
    int32_t parent;  // continuation node, or kRoot
  };
  static constexpr int32_t kRoot = -1;
  static constexpr int32_t kAcceptNode = 0;

  int32_t InternNode(int32_t pos, int32_t parent);
  StateId InternState(std::vector<int32_t> tops);
  // Adds to `tops` the stack tops reachable from matching at `pos` with `parent` below.
  void Expand(int32_t pos, int32_t parent, std::vector<int32_t>& tops);
  StateId NextLocked(StateId state, uint8_t byte);

  const Grammar grammar_;
  std::mutex mu_;
  std::vector<Node> nodes_;                              // guarded by mu_
  std::unordered_map<uint64_t, int32_t> node_ids_;       // guarded by mu_
  std::vector<std::vector<int32_t>> states_;             // sorted stack tops; guarded by mu_
  std::unordered_map<std::string, StateId> state_ids_;   // guarded by mu_ (key: tops as bytes)
  std::vector<std::array<int32_t, 256>> next_;           // -1 = not computed; guarded by mu_
  std::vector<uint8_t> flags_;                           // per state: 1 accepting, 2 can continue
  std::unordered_map<StateId, std::shared_ptr<const TokenBitmask>> masks_;  // guarded by mu_
  std::unordered_set<uint64_t> seen_;                    // Expand scratch; guarded by mu_
  int64_t masks_computed_ = 0;                           // guarded by mu_
  StateId initial_ = kDeadState;
};

}  // namespace tandem::grammar
