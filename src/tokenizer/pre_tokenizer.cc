#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

using unicode::IsLetter;
using unicode::IsNumber;
using unicode::IsWhitespace;

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

struct NamedOptions {
  std::string_view name;
  PreTokenizer::Options options;
};

// Names and flags as llama.cpp's llama_vocab::impl::load sets them.
const std::vector<NamedOptions>& NamedOptionsTable() {
  using Kind = PreTokenizer::Kind;
  static const std::vector<NamedOptions> table = {
      {"default", {Kind::kDefault, false, true}},
      {"gpt-2", {Kind::kGpt2, false, true}},
      {"llama3", {Kind::kLlama3, true, true}},
      {"llama-v3", {Kind::kLlama3, true, true}},
      {"llama-bpe", {Kind::kLlama3, true, true}},
      {"qwen2", {Kind::kQwen2, false, false}},
      {"deepseek-r1-qwen", {Kind::kQwen2, false, false}},
      // GLM-4.x / GLM-5: llama3's split regex; "glm4"/"glm5" also skip the merges of a
      // word that is already a token (llama.cpp's CHATGLM4 pre-tokenizer).
      {"chatglm-bpe", {Kind::kLlama3, false, true}},
      {"glm4", {Kind::kLlama3, true, true}},
      {"glm5", {Kind::kLlama3, true, true}},
  };
  return table;
}

// One segment [begin, end) of the code points being split; collects word lengths.
// Reads past `end` see kOutOfRange / no flags, exactly like llama.cpp's helpers.
class Segment {
 public:
  Segment(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags, size_t begin,
          size_t end, std::vector<size_t>* lengths)
      : cpts_(cpts), flags_(flags), end_(end), word_begin_(begin), lengths_(lengths) {}

  size_t end() const { return end_; }
  uint32_t Cpt(size_t pos) const { return pos < end_ ? cpts_[pos] : kOutOfRange; }
  uint16_t Flags(size_t pos) const { return pos < end_ ? flags_[pos] : 0; }

  // Ends the current word at `pos` (an empty word is not recorded).
  void Cut(size_t pos) {
    if (pos > word_begin_) lengths_->push_back(pos - word_begin_);
    word_begin_ = pos;
  }

 private:
  const std::vector<uint32_t>& cpts_;
  const std::vector<uint16_t>& flags_;
  const size_t end_;
  size_t word_begin_;
  std::vector<size_t>* lengths_;
};

bool IsOther(uint16_t flags) {  // [^\s\p{L}\p{N}], and not past the end
  return !(IsWhitespace(flags) || IsLetter(flags) || IsNumber(flags)) && flags != 0;
}

uint32_t AsciiLower(uint32_t cpt) { return cpt >= 'A' && cpt <= 'Z' ? cpt + 32 : cpt; }

// Length of the contraction ('s 't 're 've 'm 'll 'd) at `pos`, or 0. No non-ASCII
// code point lowercases to these letters, so ASCII folding equals llama.cpp's.
size_t ContractionLength(const Segment& seg, size_t pos, bool ignore_case) {
  if (seg.Cpt(pos) != '\'' || pos + 1 >= seg.end()) return 0;
  auto fold = [&](uint32_t c) { return ignore_case ? AsciiLower(c) : c; };
  const uint32_t c1 = fold(seg.Cpt(pos + 1));
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= seg.end()) return 0;
  const uint32_t c2 = fold(seg.Cpt(pos + 2));
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// Handles the trailing `\s+(?!\S)|\s+` alternatives shared by all the regexes (and, with
// `newlines`, `\s*[\r\n]+`); returns the new position.
size_t SplitWhitespace(Segment& seg, size_t pos, bool newlines) {
  size_t count = 0;
  size_t after_last_newline = 0;
  while (IsWhitespace(seg.Flags(pos + count))) {
    const uint32_t c = seg.Cpt(pos + count);
    if (newlines && (c == '\r' || c == '\n')) after_last_newline = pos + count + 1;
    ++count;
  }
  if (after_last_newline > 0) {
    pos = after_last_newline;  // \s*[\r\n]+
  } else if (count > 1 && seg.Cpt(pos + count) != kOutOfRange) {
    pos += count - 1;  // \s+(?!\S): leave the last space to prefix the next word
  } else if (count > 0) {
    pos += count;  // \s+
  } else {
    pos += 1;  // no alternative matched: a word of one code point
  }
  seg.Cut(pos);
  return pos;
}

void SplitGpt2(Segment& seg, size_t pos) {
  while (pos < seg.end()) {
    if (const size_t n = ContractionLength(seg, pos, /*ignore_case=*/false)) {
      pos += n;
      seg.Cut(pos);
      continue;
    }
    const uint32_t cpt = seg.Cpt(pos);
    uint16_t flags = cpt == ' ' ? seg.Flags(pos + 1) : seg.Flags(pos);
    bool (*run)(uint16_t) = nullptr;  // ` ?\p{L}+`, ` ?\p{N}+` or ` ?[^\s\p{L}\p{N}]+`
    if (IsLetter(flags)) {
      run = &IsLetter;
    } else if (IsNumber(flags)) {
      run = &IsNumber;
    } else if (IsOther(flags)) {
      run = &IsOther;
    }
    if (run != nullptr) {
      if (cpt == ' ') ++pos;
      while (run(flags)) flags = seg.Flags(++pos);
      seg.Cut(pos);
      continue;
    }
    pos = SplitWhitespace(seg, pos, /*newlines=*/false);
  }
}

void SplitLlama3(Segment& seg, size_t pos, size_t max_digits) {
  while (pos < seg.end()) {
    if (const size_t n = ContractionLength(seg, pos, /*ignore_case=*/true)) {
      pos += n;
      seg.Cut(pos);
      continue;
    }
    const uint32_t cpt = seg.Cpt(pos);
    const uint16_t flags = seg.Flags(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(cpt == '\r' || cpt == '\n' || IsNumber(flags)) &&
        (IsLetter(flags) || IsLetter(seg.Flags(pos + 1)))) {
      ++pos;
      while (IsLetter(seg.Flags(pos))) ++pos;
      seg.Cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (IsNumber(flags)) {
      size_t word_begin = pos;
      while (IsNumber(seg.Flags(pos))) {
        if (++pos - word_begin >= max_digits) {
          seg.Cut(pos);
          word_begin = pos;
        }
      }
      seg.Cut(pos);
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`. llama.cpp tests the code point itself (not the one
    // after the optional space) for being in range; kept for identical splits.
    uint16_t flags2 = cpt == ' ' ? seg.Flags(pos + 1) : flags;
    if (!(IsWhitespace(flags2) || IsLetter(flags2) || IsNumber(flags2)) && flags != 0) {
      if (cpt == ' ') ++pos;
      while (IsOther(flags2)) flags2 = seg.Flags(++pos);
      for (uint32_t c = seg.Cpt(pos); c == '\r' || c == '\n'; c = seg.Cpt(++pos)) {
      }
      seg.Cut(pos);
      continue;
    }
    pos = SplitWhitespace(seg, pos, /*newlines=*/true);
  }
}

// Alternating maximal runs of code points with and without `pred` (what a
// `[class]+` regex split yields: the matches and the gaps between them).
template <typename Pred>
void SplitRuns(Segment& seg, size_t pos, Pred pred) {
  while (pos < seg.end()) {
    const bool in_class = pred(pos);
    while (pos < seg.end() && pred(pos) == in_class) ++pos;
    seg.Cut(pos);
  }
}

// Leftmost non-overlapping `[0-9][0-9][0-9]` matches and the gaps between them.
void SplitDigitTriples(Segment& seg, size_t pos) {
  auto digit = [&](size_t p) { return seg.Cpt(p) >= '0' && seg.Cpt(p) <= '9'; };
  while (pos < seg.end()) {
    if (pos + 3 <= seg.end() && digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      seg.Cut(pos);
      pos += 3;
      seg.Cut(pos);
    } else {
      ++pos;
    }
  }
  seg.Cut(pos);
}

// One split pass over every current word; `split(seg, begin)` refines one word.
template <typename SplitFn>
std::vector<size_t> RunPass(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                            const std::vector<size_t>& lengths, SplitFn split) {
  std::vector<size_t> out;
  out.reserve(lengths.size());
  size_t begin = 0;
  for (size_t len : lengths) {
    Segment seg(cpts, flags, begin, begin + len, &out);
    split(seg, begin);
    begin += len;
  }
  return out;
}

}  // namespace

const std::vector<std::string_view>& PreTokenizer::SupportedNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const NamedOptions& n : NamedOptionsTable()) v.push_back(n.name);
    return v;
  }();
  return names;
}

StatusOr<PreTokenizer::Options> PreTokenizer::OptionsForName(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const NamedOptions& n : NamedOptionsTable()) {
    if (n.name == pre) return n.options;
  }
  std::string supported;
  for (std::string_view name : SupportedNames()) {
    supported += supported.empty() ? "" : ", ";
    supported += name;
  }
  return UnimplementedError("tokenizer.ggml.pre '" + std::string(pre) +
                            "' is not supported (supported: " + supported + ")");
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  const std::vector<uint32_t> cpts = unicode::DecodeUtf8(text);
  std::vector<uint16_t> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) flags[i] = unicode::CodepointFlags(cpts[i]);

  std::vector<size_t> lengths = {cpts.size()};
  switch (kind_) {
    case Kind::kGpt2:
      lengths = RunPass(cpts, flags, lengths, SplitGpt2);
      break;
    case Kind::kLlama3:
      lengths = RunPass(cpts, flags, lengths, [](Segment& s, size_t p) { SplitLlama3(s, p, 3); });
      break;
    case Kind::kQwen2:
      lengths = RunPass(cpts, flags, lengths, [](Segment& s, size_t p) { SplitLlama3(s, p, 1); });
      break;
    case Kind::kDefault: {
      // [\p{P}\$\+<=>\^~\|]+ as llama.cpp evaluates it: ASCII punctuation and
      // symbols except '`', and non-ASCII punctuation that is not whitespace.
      auto punct = [&](size_t p) {
        const uint32_t c = cpts[p];
        if (c < 128)
          return c != '`' && (flags[p] & (unicode::kFlagPunctuation | unicode::kFlagSymbol));
        return !IsWhitespace(flags[p]) &&
               (flags[p] & unicode::kFlagCategoryMask) == unicode::kFlagPunctuation;
      };
      auto number = [&](size_t p) { return !IsWhitespace(flags[p]) && IsNumber(flags[p]); };
      lengths =
          RunPass(cpts, flags, lengths, [&](Segment& s, size_t p) { SplitRuns(s, p, punct); });
      lengths = RunPass(cpts, flags, lengths, SplitGpt2);
      lengths =
          RunPass(cpts, flags, lengths, [&](Segment& s, size_t p) { SplitRuns(s, p, number); });
      lengths = RunPass(cpts, flags, lengths, SplitDigitTriples);
      break;
    }
  }

  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t begin = 0;
  std::string utf8;
  for (size_t len : lengths) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) {
      utf8.clear();
      unicode::AppendUtf8(cpts[i], &utf8);
      for (char c : utf8) word += unicode::ByteToUtf8(static_cast<uint8_t>(c));
    }
    begin += len;
  }
  return words;
}

}  // namespace tandem
