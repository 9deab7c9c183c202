#include "grammar/thinking_grammar.h"

#include <string_view>

namespace tandem::grammar {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

int32_t AddSet(Grammar& g, const ByteSet& s) {
  g.sets.push_back(s);
  return static_cast<int32_t>(g.sets.size() - 1);
}

ByteSet One(uint8_t b) {
  ByteSet s;
  s.Add(b);
  return s;
}

int AddRule(Grammar& g, const std::string& name) {
  g.rules.emplace_back();
  g.rule_names.push_back(name);
  return static_cast<int>(g.rules.size() - 1);
}

void AddAlt(Grammar& g, int rule, const std::vector<int32_t>& elems) {
  g.rules[rule].push_back(static_cast<int32_t>(g.elems.size()));
  g.elems.insert(g.elems.end(), elems.begin(), elems.end());
  g.elems.push_back(Grammar::kEnd);
}

}  // namespace

Grammar WithThinking(Grammar g, Thinking thinking) {
  if (thinking == Thinking::kNone) return g;
  const int old_root = g.root;
  // t[i]: i bytes of "</think>" matched. '<' only starts the marker, so on a mismatch
  // the match restarts at 1 ('<') or 0.
  const int n = static_cast<int>(kClose.size());
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = AddRule(g, "think-" + std::to_string(i));
  for (int i = 0; i < n; ++i) {
    const uint8_t want = static_cast<uint8_t>(kClose[i]);
    std::vector<int32_t> match = {AddSet(g, One(want))};
    if (i + 1 < n) match.push_back(Grammar::RefElem(t[i + 1]));
    AddAlt(g, t[i], match);
    if (want != '<') AddAlt(g, t[i], {AddSet(g, One('<')), Grammar::RefElem(t[1])});
    ByteSet other;
    other.AddRange(0, 255);
    other.bits[want >> 6] &= ~(uint64_t{1} << (want & 63));
    other.bits['<' >> 6] &= ~(uint64_t{1} << ('<' & 63));
    AddAlt(g, t[i], {AddSet(g, other), Grammar::RefElem(t[0])});
  }
  const int root = AddRule(g, "root-with-thinking");
  if (thinking == Thinking::kRequired) {
    AddAlt(g, root, {Grammar::RefElem(t[0]), Grammar::RefElem(old_root)});
  } else {
    const int ws = AddRule(g, "think-ws");
    ByteSet blank;
    for (uint8_t b : {' ', '\t', '\n', '\r'}) blank.Add(b);
    AddAlt(g, ws, {AddSet(g, blank), Grammar::RefElem(ws)});
    AddAlt(g, ws, {});
    std::vector<int32_t> open = {Grammar::RefElem(ws)};
    for (char c : kOpen) open.push_back(AddSet(g, One(static_cast<uint8_t>(c))));
    open.push_back(Grammar::RefElem(t[0]));
    open.push_back(Grammar::RefElem(old_root));
    AddAlt(g, root, open);
    AddAlt(g, root, {Grammar::RefElem(old_root)});
  }
  g.root = root;
  return g;
}

}  // namespace tandem::grammar
