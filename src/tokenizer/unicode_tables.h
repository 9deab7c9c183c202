// Generated Unicode data tables (see tools/gen_unicode_tables.py); internal to unicode.cc.
//
// Thread safety: constant data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::unicode_internal {

struct CategoryRange {
  uint32_t first_codepoint;  // the run ends where the next entry starts
  uint16_t flag;             // one of the category bits of unicode::kFlag*
};

extern const CategoryRange kCategoryRanges[];
extern const size_t kNumCategoryRanges;
extern const uint32_t kWhitespace[];  // ascending
extern const size_t kNumWhitespace;

}  // namespace tandem::unicode_internal
