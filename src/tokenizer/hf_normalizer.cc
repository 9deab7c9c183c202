#include "tokenizer/hf_normalizer.h"

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_normalization.h"

namespace tandem {
namespace {

bool IsWhitespace(uint32_t cpt) { return unicode::IsWhitespace(unicode::CodepointFlags(cpt)); }

// Bytes of leading (or trailing) White_Space code points of `text`.
size_t LeadingWhitespace(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!IsWhitespace(unicode::DecodeUtf8(text, &next))) break;
    pos = next;
  }
  return pos;
}

size_t TrailingWhitespace(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!IsWhitespace(unicode::DecodeUtf8(text, &pos))) break;
    end = start;
  }
  return text.size() - end;
}

}  // namespace

std::string HfNormalizer::Normalize(std::string_view text, bool* keeps_start) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kNfc:
        s = unicode::NormalizeNfc(s);
        break;
      case Step::Kind::kNfd:
        s = unicode::NormalizeNfd(s);
        break;
      case Step::Kind::kLowercase:
        s = unicode::Lowercase(s);
        break;
      case Step::Kind::kStrip: {
        const size_t lead = step.strip_left ? LeadingWhitespace(s) : 0;
        const size_t trail = step.strip_right && lead < s.size()
                                 ? TrailingWhitespace(std::string_view(s).substr(lead))
                                 : 0;
        if (lead > 0 && keeps_start != nullptr) *keeps_start = false;
        s = s.substr(lead, s.size() - lead - trail);
        break;
      }
      case Step::Kind::kReplace: {
        if (step.content.empty() && keeps_start != nullptr) {
          const auto spans = step.pattern.FindMatches(s);
          if (!spans.empty() && spans[0].is_match && spans[0].end > 0) *keeps_start = false;
        }
        s = step.pattern.ReplaceAll(s, step.content);
        break;
      }
      case Step::Kind::kPrepend:
        if (!s.empty()) s.insert(0, step.content);  // tokenizers prepends to non-empty text only
        break;
    }
  }
  return s;
}

}  // namespace tandem
