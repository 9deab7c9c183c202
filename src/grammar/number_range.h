// Grammars for JSON numbers within bounds: integers in [lo, hi], and decimals (no
// exponent) within minimum / maximum / exclusive bounds that need not be integers —
// exact, so every number the grammar allows satisfies the bounds and every such number
// with at most kMaxDigits integer and fraction digits is allowed.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.h"

namespace tandem::grammar {

constexpr int kMaxDigits = 15;  // integer and fraction digits generated (no overflow)

// [0-9]{min,max}.
Expr Digits(int min, int max);

// Non-negative integers in [lo, hi] (hi < 0: unbounded), no leading zeros.
Expr NonNegativeRange(int64_t lo, int64_t hi);

struct NumberBound {
  double value;    // |value| <= 1e15
  bool exclusive;  // exclusiveMinimum / exclusiveMaximum
};

// JSON numbers -?(0|[1-9][0-9]*)(\.[0-9]+)? whose value v satisfies lo <= v (lo < v when
// exclusive) and v <= hi (v < hi); each bound optional. The bounds are taken as the
// shortest decimals that round-trip their doubles. nullopt when no number fits.
std::optional<Expr> DecimalRange(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi);

}  // namespace tandem::grammar
