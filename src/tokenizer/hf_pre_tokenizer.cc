#include "tokenizer/hf_pre_tokenizer.h"

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

using Behavior = HfPreTokenizer::Behavior;
using Span = HfPattern::Span;

// Spans to keep after applying `behavior` to the pattern's spans (NormalizedString::split).
std::vector<Span> ApplyBehavior(std::vector<Span> spans, Behavior behavior) {
  std::vector<Span> out;
  switch (behavior) {
    case Behavior::kIsolated:
      return spans;
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return out;
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;  // scanning backwards: "previous" is the span after
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      return std::vector<Span>(out.rbegin(), out.rend());
    }
  }
  return spans;
}

// Replaces `words` by the pieces `split_word` cuts each one into, dropping empty ones.
template <typename SplitWord>
void SplitEach(std::vector<HfWord>* words, SplitWord split_word) {
  std::vector<HfWord> out;
  out.reserve(words->size());
  for (HfWord& word : *words) {
    for (HfWord& piece : split_word(std::move(word))) {
      if (!piece.text.empty()) out.push_back(std::move(piece));
    }
  }
  words->swap(out);
}

std::vector<HfWord> Cut(const HfWord& word, const std::vector<Span>& spans) {
  std::vector<HfWord> pieces;
  pieces.reserve(spans.size());
  for (const Span& s : spans) {
    pieces.push_back({word.text.substr(s.begin, s.end - s.begin), word.at_start && s.begin == 0});
  }
  return pieces;
}

std::vector<Span> DigitSpans(const std::string& text) {
  std::vector<Span> spans;  // every digit code point is a match of one character
  size_t prev = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    const uint32_t cpt = unicode::DecodeUtf8(text, &pos);
    if (!unicode::IsNumber(unicode::CodepointFlags(cpt))) continue;
    if (prev != begin) spans.push_back({prev, begin, false});
    spans.push_back({begin, pos, true});
    prev = pos;
  }
  if (prev != text.size() || text.empty()) spans.push_back({prev, text.size(), false});
  return spans;
}

std::string ToByteLevel(const std::string& text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += unicode::ByteToUtf8(static_cast<uint8_t>(c));
  return out;
}

std::string ReplaceSpaces(const std::string& text, const std::string& replacement) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ') {
      out += replacement;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

const char* HfPreTokenizer::Gpt2Regex() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

void HfPreTokenizer::PreTokenize(std::vector<HfWord>* words) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kSplit:
        SplitEach(words, [&](HfWord word) {
          std::vector<Span> spans = step.pattern.FindMatches(word.text);
          if (step.invert) {
            for (Span& s : spans) s.is_match = !s.is_match;
          }
          return Cut(word, ApplyBehavior(std::move(spans), step.behavior));
        });
        break;
      case Step::Kind::kDigits:
        SplitEach(words, [&](HfWord word) {
          return Cut(word, ApplyBehavior(DigitSpans(word.text), step.individual_digits
                                                                    ? Behavior::kIsolated
                                                                    : Behavior::kContiguous));
        });
        break;
      case Step::Kind::kByteLevel:
        SplitEach(words, [&](HfWord word) {
          if (step.add_prefix_space && word.text[0] != ' ') word.text.insert(0, " ");
          std::vector<HfWord> pieces = step.use_regex
                                           ? Cut(word, step.pattern.FindMatches(word.text))
                                           : std::vector<HfWord>{std::move(word)};
          for (HfWord& piece : pieces) piece.text = ToByteLevel(piece.text);
          return pieces;
        });
        break;
      case Step::Kind::kMetaspace:
        SplitEach(words, [&](HfWord word) {
          word.text = ReplaceSpaces(word.text, step.replacement);
          const bool prepend = step.prepend_scheme == PrependScheme::kAlways ||
                               (step.prepend_scheme == PrependScheme::kFirst && word.at_start);
          if (prepend && word.text.compare(0, step.replacement.size(), step.replacement) != 0) {
            word.text.insert(0, step.replacement);
          }
          if (!step.split) return std::vector<HfWord>{std::move(word)};
          return Cut(word,
                     ApplyBehavior(HfPattern::Literal(step.replacement).FindMatches(word.text),
                                   Behavior::kMergedWithNext));
        });
        break;
    }
  }
}

}  // namespace tandem
