#include "tokenizer/unicode_normalization.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm_tables.h"

namespace tandem::unicode {
namespace {

using unicode_internal::CodepointPair;
using unicode_internal::Composition;

// Hangul syllables decompose and compose by arithmetic (Unicode section 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Length of the well-formed sequence starting at text[pos], or 0 if none does; in
// `*subpart` the length of the maximal ill-formed prefix (>= 1) when 0 is returned.
size_t WellFormedLength(std::string_view text, size_t pos, size_t* subpart) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *subpart = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    const bool ok = pos + k < text.size() && (k == 1 ? (byte(pos + k) >= lo && byte(pos + k) <= hi)
                                                     : (byte(pos + k) & 0xC0) == 0x80);
    if (!ok) {
      *subpart = k;
      return 0;
    }
  }
  return need + 1;
}

const CodepointPair* FindPair(const CodepointPair* table, size_t n, uint32_t cpt) {
  const CodepointPair* end = table + n;
  const CodepointPair* it = std::lower_bound(
      table, end, cpt, [](const CodepointPair& p, uint32_t c) { return p.codepoint < c; });
  return it != end && it->codepoint == cpt ? it : nullptr;
}

void Decompose(uint32_t cpt, std::vector<uint32_t>* out) {
  if (cpt >= kSBase && cpt < kSBase + kSCount) {
    const uint32_t s = cpt - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const CodepointPair* d = FindPair(unicode_internal::kCanonicalDecompositions,
                                    unicode_internal::kNumCanonicalDecompositions, cpt);
  if (d == nullptr) {
    out->push_back(cpt);
    return;
  }
  Decompose(d->first, out);  // depth is bounded by the data (at most 4 levels)
  if (d->second != 0) Decompose(d->second, out);
}

// The primary composite of (first, second), or 0.
uint32_t Compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const Composition* begin = unicode_internal::kCompositions;
  const Composition* end = begin + unicode_internal::kNumCompositions;
  const Composition* it =
      std::lower_bound(begin, end, std::make_pair(first, second),
                       [](const Composition& c, const std::pair<uint32_t, uint32_t>& k) {
                         return c.first < k.first || (c.first == k.first && c.second < k.second);
                       });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// Canonical decomposition followed by the canonical ordering of combining marks.
std::vector<uint32_t> DecomposeAndOrder(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) Decompose(DecodeUtf8(text, &pos), &cpts);
  // A stable insertion sort of each run of non-starters by combining class.
  for (size_t i = 1; i < cpts.size(); ++i) {
    const uint8_t ccc = CanonicalCombiningClass(cpts[i]);
    if (ccc == 0) continue;
    for (size_t j = i; j > 0; --j) {
      const uint8_t prev = CanonicalCombiningClass(cpts[j - 1]);
      if (prev == 0 || prev <= ccc) break;
      std::swap(cpts[j - 1], cpts[j]);
    }
  }
  return cpts;
}

std::string Encode(const std::vector<uint32_t>& cpts) {
  std::string out;
  out.reserve(cpts.size());
  for (uint32_t c : cpts) AppendUtf8(c, &out);
  return out;
}

bool IsAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; });
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  for (size_t pos = 0, subpart = 0; pos < bytes.size();) {
    const size_t n = WellFormedLength(bytes, pos, &subpart);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    size_t subpart = 0;
    const size_t n = WellFormedLength(bytes, pos, &subpart);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      AppendUtf8(kReplacementChar, &out);
      pos += subpart;
    }
  }
  return out;
}

uint8_t CanonicalCombiningClass(uint32_t cpt) {
  if (cpt < 0x300) return 0;
  const auto* begin = unicode_internal::kCombiningClasses;
  const auto* end = begin + unicode_internal::kNumCombiningClasses;
  // The first range ending at or after cpt.
  const auto* it =
      std::lower_bound(begin, end, cpt, [](const auto& r, uint32_t c) { return r.last < c; });
  return it != end && it->first <= cpt ? it->combining_class : 0;
}

std::string NormalizeNfd(std::string_view text) {
  if (IsAscii(text)) return std::string(text);
  return Encode(DecomposeAndOrder(text));
}

std::string NormalizeNfc(std::string_view text) {
  if (IsAscii(text)) return std::string(text);
  const std::vector<uint32_t> cpts = DecomposeAndOrder(text);
  // Canonical composition: each code point joins the last starter unless something
  // between them blocks it (a code point of class 0, or of a class >= its own).
  std::vector<uint32_t> out;
  out.reserve(cpts.size());
  ptrdiff_t starter = -1;
  int last_class = -1;  // class of the last code point kept after the starter; -1: none
  for (uint32_t c : cpts) {
    const int ccc = CanonicalCombiningClass(c);
    if (starter >= 0 && (last_class == -1 || last_class < ccc)) {
      if (const uint32_t composite = Compose(out[starter], c); composite != 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (ccc == 0) {
      starter = static_cast<ptrdiff_t>(out.size());
      last_class = -1;
    } else {
      last_class = ccc;
    }
    out.push_back(c);
  }
  return Encode(out);
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t c = DecodeUtf8(text, &pos);
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : static_cast<char>(c));
      continue;
    }
    const CodepointPair* m =
        FindPair(unicode_internal::kLowercase, unicode_internal::kNumLowercase, c);
    if (m == nullptr) {
      AppendUtf8(c, &out);
      continue;
    }
    AppendUtf8(m->first, &out);
    if (m->second != 0) AppendUtf8(m->second, &out);
  }
  return out;
}

bool IsWordChar(uint32_t cpt) {
  if (cpt < 0x80) {
    return (cpt >= 'a' && cpt <= 'z') || (cpt >= 'A' && cpt <= 'Z') || (cpt >= '0' && cpt <= '9') ||
           cpt == '_';
  }
  const auto* begin = unicode_internal::kWordChars;
  const auto* end = begin + unicode_internal::kNumWordChars;
  const auto* it =
      std::lower_bound(begin, end, cpt, [](const auto& r, uint32_t c) { return r.last < c; });
  return it != end && it->first <= cpt;
}

}  // namespace tandem::unicode
