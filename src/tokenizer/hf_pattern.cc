#include "tokenizer/hf_pattern.h"

namespace tandem {

HfPattern HfPattern::Literal(std::string text) {
  HfPattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

StatusOr<HfPattern> HfPattern::Regex(std::string_view pattern) {
  HfPattern p;
  TANDEM_ASSIGN_OR_RETURN(p.regex_, HfRegex::Compile(pattern));
  return p;
}

std::vector<HfPattern::Span> HfPattern::FindMatches(std::string_view text) const {
  std::vector<Span> spans;
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return spans;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  if (regex_) {
    matches = regex_->FindAll(text);
  } else if (!literal_.empty()) {
    for (size_t pos = 0; (pos = text.find(literal_, pos)) != std::string_view::npos;
         pos += literal_.size()) {
      matches.emplace_back(pos, pos + literal_.size());
    }
  }
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (prev != begin) spans.push_back({prev, begin, false});
    spans.push_back({begin, end, true});
    prev = end;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

std::string HfPattern::ReplaceAll(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  for (const Span& span : FindMatches(text)) {
    if (span.is_match) {
      out.append(content);
    } else {
      out.append(text.substr(span.begin, span.end - span.begin));
    }
  }
  return out;
}

}  // namespace tandem
