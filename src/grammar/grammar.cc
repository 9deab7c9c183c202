#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <set>

#include "common/utf8.h"

namespace tandem::grammar {
namespace {

using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] into runs whose UTF-8 encodings are products of byte ranges (the
// classic construction: split at encoding-length and continuation-byte boundaries).
// Surrogates are skipped.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) Utf8Sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) Utf8Sequences(0xE000, hi, out);
    return;
  }
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      Utf8Sequences(lo, edge, out);
      Utf8Sequences(edge + 1, hi, out);
      return;
    }
  }
  const int n = Utf8EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  EncodeUtf8(lo, a);
  EncodeUtf8(hi, b);
  ByteRangeSeq seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

std::string ByteText(uint8_t b) {
  if (b >= 0x20 && b < 0x7F && b != '\\' && b != ']' && b != '-' && b != '^' && b != '"') return std::string(1, b);
  static const char* hex = "0123456789ABCDEF";
  return std::string("\\x") + hex[b >> 4] + hex[b & 15];
}

}  // namespace

Expr Expr::Lit(std::string bytes) {
  Expr e;
  e.kind = Kind::kLiteral;
  e.text = std::move(bytes);
  return e;
}

Expr Expr::Class(std::vector<CodeRange> ranges, bool negated) {
  Expr e;
  e.kind = Kind::kClass;
  e.ranges = NormalizeRanges(std::move(ranges), negated);
  return e;
}

Expr Expr::Ref(int rule) {
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}

Expr Expr::Seq(std::vector<Expr> kids) {
  if (kids.size() == 1) return std::move(kids[0]);
  Expr e;
  e.kind = Kind::kSeq;
  e.kids = std::move(kids);
  return e;
}

Expr Expr::Alt(std::vector<Expr> kids) {
  if (kids.size() == 1) return std::move(kids[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.kids = std::move(kids);
  return e;
}

Expr Expr::Repeat(Expr kid, int min, int max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.kids.push_back(std::move(kid));
  e.min = min;
  e.max = max;
  return e;
}

std::vector<CodeRange> NormalizeRanges(std::vector<CodeRange> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges) {
    if (r.first > r.second) continue;
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (!negated) return merged;
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& r : merged) {
    if (r.first > next) out.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

int GrammarBuilder::Declare(const std::string& name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  const int id = static_cast<int>(names_.size());
  ids_[name] = id;
  names_.push_back(name);
  bodies_.emplace_back();
  defined_.push_back(false);
  return id;
}

int GrammarBuilder::Fresh(const std::string& hint) {
  std::string name;
  do {
    name = hint + "-" + std::to_string(++fresh_);
  } while (ids_.count(name) != 0);
  return Declare(name);
}

void GrammarBuilder::Define(int rule, Expr body) {
  bodies_[rule] = std::move(body);
  defined_[rule] = true;
}

int32_t GrammarBuilder::SetIndex(const ByteSet& set, Grammar& g) {
  auto [it, inserted] = set_ids_.emplace(set, static_cast<int32_t>(g.sets.size()));
  if (inserted) g.sets.push_back(set);
  return it->second;
}

void GrammarBuilder::AddAlternatives(int rule, std::vector<std::vector<int32_t>> alternatives, Grammar& g) {
  for (std::vector<int32_t>& alt : alternatives) {
    g.rules[rule].push_back(static_cast<int32_t>(g.elems.size()));
    g.elems.insert(g.elems.end(), alt.begin(), alt.end());
    g.elems.push_back(Grammar::kEnd);
  }
}

int GrammarBuilder::LowerToRule(const std::vector<std::vector<int32_t>>& alternatives, Grammar& g) {
  const int rule = static_cast<int>(g.rules.size());
  g.rules.emplace_back();
  g.rule_names.emplace_back();
  AddAlternatives(rule, alternatives, g);
  return rule;
}

void GrammarBuilder::Lower(const Expr& e, Grammar& g, std::vector<int32_t>& seq) {
  if (too_large_ || g.elems.size() + seq.size() > kMaxElems) {
    too_large_ = true;
    return;
  }
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      for (unsigned char c : e.text) {
        ByteSet s;
        s.Add(c);
        seq.push_back(SetIndex(s, g));
      }
      return;
    case Expr::Kind::kClass: {
      ByteSet ascii;
      std::vector<ByteRangeSeq> multi;
      for (const CodeRange& r : e.ranges) {
        if (r.first < 0x80) ascii.AddRange(static_cast<uint8_t>(r.first), static_cast<uint8_t>(std::min<uint32_t>(r.second, 0x7F)));
        if (r.second >= 0x80) Utf8Sequences(std::max<uint32_t>(r.first, 0x80), r.second, multi);
      }
      if (multi.empty()) {
        seq.push_back(SetIndex(ascii, g));  // an empty set: nothing matches
        return;
      }
      std::vector<std::vector<int32_t>> alts;
      if (!ascii.empty()) alts.push_back({SetIndex(ascii, g)});
      for (const ByteRangeSeq& m : multi) {
        std::vector<int32_t> alt;
        for (auto [lo, hi] : m) {
          ByteSet s;
          s.AddRange(lo, hi);
          alt.push_back(SetIndex(s, g));
        }
        alts.push_back(std::move(alt));
      }
      seq.push_back(Grammar::RefElem(LowerToRule(alts, g)));
      return;
    }
    case Expr::Kind::kRef:
      seq.push_back(Grammar::RefElem(e.rule));
      return;
    case Expr::Kind::kSeq:
      for (const Expr& k : e.kids) Lower(k, g, seq);
      return;
    case Expr::Kind::kAlt: {
      std::vector<std::vector<int32_t>> alts(e.kids.size());
      for (size_t i = 0; i < e.kids.size(); ++i) Lower(e.kids[i], g, alts[i]);
      seq.push_back(Grammar::RefElem(LowerToRule(alts, g)));
      return;
    }
    case Expr::Kind::kRepeat: {
      std::vector<int32_t> item;
      Lower(e.kids[0], g, item);
      for (int i = 0; i < e.min && !too_large_; ++i) {
        seq.insert(seq.end(), item.begin(), item.end());
        too_large_ = g.elems.size() + seq.size() > kMaxElems;
      }
      if (e.max == kUnbounded) {
        // star ::= item star | ""  (right recursion: the matcher's stacks do not grow)
        const int star = LowerToRule({}, g);
        std::vector<int32_t> loop = item;
        loop.push_back(Grammar::RefElem(star));
        AddAlternatives(star, {loop, {}}, g);
        seq.push_back(Grammar::RefElem(star));
        return;
      }
      // opt_k ::= item opt_{k-1} | ""  for the max - min optional copies.
      int prev = -1;
      for (int k = 0; k < e.max - e.min && !too_large_; ++k) {
        too_large_ = g.elems.size() + seq.size() + item.size() * k > kMaxElems;
        std::vector<int32_t> more = item;
        if (prev >= 0) more.push_back(Grammar::RefElem(prev));
        prev = LowerToRule({more, {}}, g);
      }
      if (prev >= 0) seq.push_back(Grammar::RefElem(prev));
      return;
    }
  }
}

StatusOr<Grammar> GrammarBuilder::Build(const std::string& root) && {
  auto it = ids_.find(root);
  if (it == ids_.end() || !defined_[it->second]) return InvalidArgumentError("the grammar has no rule '" + root + "'");
  Grammar g;
  g.root = it->second;
  g.rules.resize(names_.size());
  g.rule_names = names_;
  for (size_t r = 0; r < names_.size(); ++r) {
    std::vector<std::vector<int32_t>> alts;
    const Expr& body = bodies_[r];
    if (body.kind == Expr::Kind::kAlt) {
      for (const Expr& k : body.kids) Lower(k, g, alts.emplace_back());
    } else {
      Lower(body, g, alts.emplace_back());
    }
    AddAlternatives(static_cast<int>(r), std::move(alts), g);
  }
  if (too_large_) return InvalidArgumentError("the grammar is too large (its repetitions expand too far)");
  // Rules referenced but never defined.
  for (int32_t e : g.elems) {
    if (Grammar::IsRef(e) && Grammar::RefRule(e) < static_cast<int>(names_.size()) &&
        !defined_[Grammar::RefRule(e)]) {
      return InvalidArgumentError("the grammar uses rule '" + names_[Grammar::RefRule(e)] + "' but never defines it");
    }
  }
  // Nullable rules (fixpoint), then left recursion: a cycle through rules that can be
  // entered without consuming a byte.
  const size_t n = g.rules.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t start : g.rules[r]) {
        int32_t p = start;
        while (g.elems[p] != Grammar::kEnd && Grammar::IsRef(g.elems[p]) && nullable[Grammar::RefRule(g.elems[p])]) ++p;
        if (g.elems[p] == Grammar::kEnd) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t start : g.rules[r]) {
      for (int32_t p = start; g.elems[p] != Grammar::kEnd && Grammar::IsRef(g.elems[p]); ++p) {
        // A reference in tail position runs as a tail call (same parent stack), so a
        // cycle through it cannot grow the stacks: only the others count.
        if (g.elems[p + 1] != Grammar::kEnd) first[r].push_back(Grammar::RefRule(g.elems[p]));
        if (!nullable[Grammar::RefRule(g.elems[p])]) break;
      }
    }
  }
  std::vector<int> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  std::string cycle;
  std::function<bool(int)> dfs = [&](int r) {
    color[r] = 1;
    for (int s : first[r]) {
      if (color[s] == 1) {
        cycle = g.rule_names[s];
        return true;
      }
      if (color[s] == 0 && dfs(s)) return true;
    }
    color[r] = 2;
    return false;
  };
  for (size_t r = 0; r < n; ++r) {
    if (color[r] == 0 && dfs(static_cast<int>(r))) {
      return InvalidArgumentError("the grammar is left-recursive (rule '" + (cycle.empty() ? "<helper>" : cycle) +
                                  "' can reach itself without consuming input)");
    }
  }
  return g;
}

std::string Grammar::ToString() const {
  std::string out;
  auto name = [&](int r) { return rule_names[r].empty() ? "_" + std::to_string(r) : rule_names[r]; };
  for (size_t r = 0; r < rules.size(); ++r) {
    out += name(static_cast<int>(r)) + " ::=";
    for (size_t a = 0; a < rules[r].size(); ++a) {
      if (a > 0) out += " |";
      for (int32_t p = rules[r][a]; elems[p] != kEnd; ++p) {
        if (IsRef(elems[p])) {
          out += " " + name(RefRule(elems[p]));
          continue;
        }
        const ByteSet& s = sets[elems[p]];
        std::string cls;
        int count = 0;
        for (int b = 0; b < 256; ++b) {
          if (!s.Has(static_cast<uint8_t>(b))) continue;
          int e = b;
          while (e + 1 < 256 && s.Has(static_cast<uint8_t>(e + 1))) ++e;
          cls += ByteText(static_cast<uint8_t>(b));
          if (e > b) cls += "-" + ByteText(static_cast<uint8_t>(e));
          count += e - b + 1;
          b = e;
        }
        out += count == 1 ? " \"" + cls + "\"" : " [" + cls + "]";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace tandem::grammar
