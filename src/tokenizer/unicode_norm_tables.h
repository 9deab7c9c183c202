// Generated Unicode normalization, case and word-character data (see
// tools/gen_unicode_norm_tables.py, which writes unicode_decomposition_tables.cc,
// unicode_composition_tables.cc and unicode_case_tables.cc); internal to unicode_normalization.cc.
//
// Thread safety: constant data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::unicode_internal {

// A code point and what it maps to: one code point (second == 0) or two.
struct CodepointPair {
  uint32_t codepoint;
  uint32_t first;
  uint32_t second;
};

struct CombiningClassRange {
  uint32_t first;  // inclusive
  uint32_t last;   // inclusive
  uint8_t combining_class;
};

struct CodepointRange {
  uint32_t first;  // inclusive
  uint32_t last;   // inclusive
};

struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const CodepointPair kCanonicalDecompositions[];  // ascending code points
extern const size_t kNumCanonicalDecompositions;
extern const CombiningClassRange kCombiningClasses[];  // ascending, disjoint
extern const size_t kNumCombiningClasses;
extern const Composition kCompositions[];  // ascending (first, second)
extern const size_t kNumCompositions;
extern const CodepointPair kLowercase[];  // ascending code points
extern const size_t kNumLowercase;
extern const CodepointRange kWordChars[];  // ascending, disjoint
extern const size_t kNumWordChars;

}  // namespace tandem::unicode_internal
