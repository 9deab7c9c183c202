#include "grammar/grammar_automaton.h"

#include <algorithm>
#include <cstring>

namespace tandem::grammar {
namespace {

// Masks kept per automaton (32 KiB each for a 262,144-token vocabulary). When full the
// cache starts over: states a request is in are recomputed on demand.
constexpr size_t kMaxCachedMasks = 512;

}  // namespace

GrammarAutomaton::GrammarAutomaton(Grammar grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({-2, -2});  // kAcceptNode: the root rule completed
  states_.emplace_back();      // kDeadState
  next_.emplace_back();
  next_.back().fill(kDeadState);
  flags_.push_back(0);
  state_ids_[""] = kDeadState;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> tops;
  seen_.clear();
  for (int32_t start : grammar_.rules[grammar_.root]) Expand(start, kRoot, tops);
  initial_ = InternState(std::move(tops));
}

int32_t GrammarAutomaton::InternNode(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void GrammarAutomaton::Expand(int32_t pos, int32_t parent, std::vector<int32_t>& tops) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  if (!seen_.insert(key).second) return;
  const int32_t e = grammar_.elems[pos];
  if (e == Grammar::kEnd) {
    if (parent == kRoot) {
      tops.push_back(kAcceptNode);
    } else {
      const Node p = nodes_[parent];
      Expand(p.pos, p.parent, tops);
    }
    return;
  }
  if (!Grammar::IsRef(e)) {
    tops.push_back(InternNode(pos, parent));
    return;
  }
  // The continuation after the reference; one that only returns is its parent (tail call).
  const int32_t cont = grammar_.elems[pos + 1] == Grammar::kEnd ? parent : InternNode(pos + 1, parent);
  for (int32_t start : grammar_.rules[Grammar::RefRule(e)]) Expand(start, cont, tops);
}

StateId GrammarAutomaton::InternState(std::vector<int32_t> tops) {
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  std::string key(reinterpret_cast<const char*>(tops.data()), tops.size() * sizeof(int32_t));
  auto [it, inserted] = state_ids_.emplace(std::move(key), static_cast<StateId>(states_.size()));
  if (!inserted) return it->second;
  uint8_t flags = 0;
  for (int32_t n : tops) flags |= n == kAcceptNode ? 1 : 2;
  states_.push_back(std::move(tops));
  next_.emplace_back();
  next_.back().fill(-1);
  flags_.push_back(flags);
  return it->second;
}

StateId GrammarAutomaton::NextLocked(StateId state, uint8_t byte) {
  const int32_t known = next_[state][byte];
  if (known >= 0) return known;
  std::vector<int32_t> tops;
  seen_.clear();
  for (size_t i = 0; i < states_[state].size(); ++i) {
    const int32_t n = states_[state][i];
    if (n == kAcceptNode) continue;
    const Node node = nodes_[n];
    if (grammar_.sets[grammar_.elems[node.pos]].Has(byte)) Expand(node.pos + 1, node.parent, tops);
  }
  const StateId next = tops.empty() ? kDeadState : InternState(std::move(tops));
  next_[state][byte] = next;
  return next;
}

StateId GrammarAutomaton::Advance(StateId state, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (char c : bytes) {
    if (state == kDeadState) break;
    state = NextLocked(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool GrammarAutomaton::IsAccepting(StateId state) {
  std::lock_guard<std::mutex> lock(mu_);
  return flags_[state] & 1;
}

bool GrammarAutomaton::CanContinue(StateId state) {
  std::lock_guard<std::mutex> lock(mu_);
  return flags_[state] & 2;
}

std::shared_ptr<const TokenBitmask> GrammarAutomaton::Mask(StateId state, const TokenTrie& trie) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(state);
  if (it != masks_.end()) return it->second;
  auto mask = std::make_shared<TokenBitmask>((trie.vocab_size() + 63) / 64, 0);
  uint64_t* bits = mask->data();
  auto allow = [&](int32_t t) { bits[t >> 6] |= uint64_t{1} << (t & 63); };
  if (flags_[state] & 1) {
    for (int32_t t : trie.eog_ids()) allow(t);
  }
  // Preorder walk: at[d] = the state after the first d bytes of the current node's path.
  std::vector<StateId> at(trie.max_depth() + 1);
  at[0] = state;
  const int32_t n = trie.num_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t d = trie.depth(i);
    const StateId s = NextLocked(at[d - 1], trie.byte(i));
    if (s == kDeadState) {
      i = trie.subtree_end(i);
      continue;
    }
    at[d] = s;
    for (const int32_t* t = trie.tokens_begin(i); t != trie.tokens_end(i); ++t) allow(*t);
    ++i;
  }
  ++masks_computed_;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  masks_[state] = mask;
  return mask;
}

int64_t GrammarAutomaton::num_states() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(states_.size());
}

int64_t GrammarAutomaton::masks_computed() {
  std::lock_guard<std::mutex> lock(mu_);
  return masks_computed_;
}

}  // namespace tandem::grammar
