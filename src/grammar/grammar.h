// Grammar: a context-free grammar over bytes, the form every structured-output
// constraint (JSON schema, regex, choice, GBNF) is compiled into before matching.
//
// Built in two layers:
//   * Expr: a tree (literal, character class over code points, rule reference,
//     sequence, alternation, bounded/unbounded repetition) that the front ends produce.
//   * Grammar: the flat form the matcher walks. Each rule is a list of alternatives;
//     each alternative is a run of elements in `elems` ending with kEnd. An element is a
//     byte set (a terminal: one byte out of the set) or a reference to a rule. Character
//     classes above ASCII are lowered to UTF-8 byte sequences, repetitions to helper
//     rules (right recursion, which the matcher runs without growing its stacks).
//
//   GrammarBuilder b;
//   int value = b.Declare("value");
//   b.Define(b.Declare("root"), Expr::Seq({Expr::Lit("["), Expr::Ref(value), Expr::Lit("]")}));
//   b.Define(value, Expr::Plus(Expr::Class({{'0', '9'}})));
//   StatusOr<Grammar> g = std::move(b).Build("root");
//
// Build refuses left recursion (a rule that can reach itself without consuming a byte),
// rules used but never defined (naming the rule), and grammars whose repetitions expand
// past kMaxElems elements. Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tandem::grammar {

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator<(const ByteSet& o) const { return bits < o.bits; }
  bool operator==(const ByteSet& o) const { return bits == o.bits; }
};

// Inclusive code point range.
using CodeRange = std::pair<uint32_t, uint32_t>;
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr int kUnbounded = -1;

struct Expr {
  enum class Kind { kLiteral, kClass, kRef, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kSeq;
  std::string text;               // kLiteral: the bytes
  std::vector<CodeRange> ranges;  // kClass: the code points (already negated if asked)
  int rule = -1;                  // kRef
  std::vector<Expr> kids;         // kSeq, kAlt, kRepeat (one kid)
  int min = 0;                    // kRepeat
  int max = kUnbounded;           // kRepeat

  static Expr Lit(std::string bytes);
  // `negated`: the complement within [0, kMaxCodePoint].
  static Expr Class(std::vector<CodeRange> ranges, bool negated = false);
  static Expr Ref(int rule);
  static Expr Seq(std::vector<Expr> kids);
  static Expr Alt(std::vector<Expr> kids);
  static Expr Repeat(Expr kid, int min, int max);
  static Expr Opt(Expr kid) { return Repeat(std::move(kid), 0, 1); }
  static Expr Star(Expr kid) { return Repeat(std::move(kid), 0, kUnbounded); }
  static Expr Plus(Expr kid) { return Repeat(std::move(kid), 1, kUnbounded); }
  static Expr Empty() { return Seq({}); }
};

// Sorted, merged ranges; the complement when `negated`.
std::vector<CodeRange> NormalizeRanges(std::vector<CodeRange> ranges, bool negated);

struct Grammar {
  // elems: >= 0 is a terminal (index into `sets`), kEnd ends an alternative, and
  // RefElem(r) = -(r + 2) references rule r.
  static constexpr int32_t kEnd = -1;
  static int32_t RefElem(int rule) { return -(rule + 2); }
  static bool IsRef(int32_t e) { return e <= -2; }
  static int RefRule(int32_t e) { return -e - 2; }

  std::vector<ByteSet> sets;
  std::vector<int32_t> elems;
  std::vector<std::vector<int32_t>> rules;  // rule -> start positions of its alternatives
  std::vector<std::string> rule_names;      // for messages ("" for helpers)
  int root = 0;

  // The grammar in GBNF-like text (tests, logs).
  std::string ToString() const;
};

class GrammarBuilder {
 public:
  // The id of the rule named `name`, created (undefined) on first use.
  int Declare(const std::string& name);
  // A fresh rule with a unique name built from `hint`.
  int Fresh(const std::string& hint);
  bool IsDefined(int rule) const { return defined_[rule]; }
  // Precondition: `rule` came from Declare/Fresh. A second Define of a rule replaces it.
  void Define(int rule, Expr body);

  // InvalidArgument naming the rule for an undefined rule reachable from `root`, or for
  // left recursion.
  StatusOr<Grammar> Build(const std::string& root) &&;

 private:
  void Lower(const Expr& e, Grammar& g, std::vector<int32_t>& seq);
  int LowerToRule(const std::vector<std::vector<int32_t>>& alternatives, Grammar& g);
  int32_t SetIndex(const ByteSet& set, Grammar& g);
  void AddAlternatives(int rule, std::vector<std::vector<int32_t>> alternatives, Grammar& g);

  // Lowering stops (and Build fails) once the flat grammar passes this many elements:
  // nested repetitions such as (a{1000}){1000} would otherwise take unbounded memory.
  static constexpr size_t kMaxElems = size_t{1} << 21;
  bool too_large_ = false;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<Expr> bodies_;
  std::vector<bool> defined_;
  std::map<ByteSet, int32_t> set_ids_;
  int fresh_ = 0;
};

}  // namespace tandem::grammar
