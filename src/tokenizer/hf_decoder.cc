#include "tokenizer/hf_decoder.h"

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_normalization.h"

namespace tandem {
namespace {

using Kind = HfDecoder::Step::Kind;

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The bytes of a byte-level token, or the token itself when a character is not in
// GPT-2's byte alphabet.
std::string ByteLevelBytes(const std::string& token) {
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const int byte = unicode::CodepointToByte(unicode::DecodeUtf8(token, &pos));
    if (byte < 0) return token;
    out.push_back(static_cast<char>(byte));
  }
  return out;
}

// The byte a "<0xXX>" token stands for, or -1.
int ByteToken(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  // Rust's u8::from_str_radix, which tokenizers uses, also takes a sign: "<0x+A>" is 0x0A.
  for (size_t i = token[3] == '+' ? 4 : 3; i < 5; ++i) {
    const char c = token[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

// Each token with up to `start` leading and `stop` trailing copies of `c` removed.
std::string StripToken(const std::string& token, uint32_t c, size_t start, size_t stop) {
  const std::vector<uint32_t> cpts = unicode::DecodeUtf8(token);
  size_t begin = 0;
  while (begin < start && begin < cpts.size() && cpts[begin] == c) ++begin;
  size_t end = cpts.size();
  for (size_t i = 0; i < stop && end > begin && cpts[end - 1] == c; ++i) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) unicode::AppendUtf8(cpts[i], &out);
  return out;
}

std::string ReplaceAllLiteral(const std::string& text, const std::string& from,
                              std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; !from.empty() && (hit = text.find(from, pos)) != std::string::npos;
       pos = hit + from.size()) {
    out.append(text, pos, hit - pos).append(to);
  }
  out.append(text, pos, std::string::npos);
  return out;
}

}  // namespace

std::vector<std::string> HfDecoder::Run(std::vector<std::string> tokens, bool piece) const {
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    switch (step.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) bytes += ByteLevelBytes(t);
        next.push_back(piece ? std::move(bytes) : unicode::ToValidUtf8(bytes));
        break;
      }
      case Kind::kReplace:
        for (std::string& t : tokens) {
          // In piece mode a token may hold part of a character; a regex only sees UTF-8.
          next.push_back(piece && !unicode::IsValidUtf8(t)
                             ? std::move(t)
                             : step.pattern.ReplaceAll(t, step.content));
        }
        break;
      case Kind::kByteFallback: {
        std::string run;  // bytes of consecutive byte tokens
        size_t run_tokens = 0;
        auto flush = [&] {
          if (run_tokens == 0) return;
          if (piece || unicode::IsValidUtf8(run)) {
            next.push_back(run);
          } else {
            for (size_t i = 0; i < run_tokens; ++i) next.emplace_back(kReplacement);
          }
          run.clear();
          run_tokens = 0;
        };
        for (std::string& t : tokens) {
          if (const int byte = ByteToken(t); byte >= 0) {
            run.push_back(static_cast<char>(byte));
            ++run_tokens;
            continue;
          }
          flush();
          next.push_back(std::move(t));
        }
        flush();
        break;
      }
      case Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case Kind::kStrip: {
        if (piece) {
          next = std::move(tokens);
          break;
        }
        const std::vector<uint32_t> c = unicode::DecodeUtf8(step.content);
        for (const std::string& t : tokens) {
          next.push_back(StripToken(t, c.empty() ? 0 : c[0], step.start, step.stop));
        }
        break;
      }
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          const bool first = i == 0 && !piece;
          next.push_back(
              ReplaceAllLiteral(tokens[i], step.content, first && step.drop_first ? "" : " "));
        }
        break;
      case Kind::kBpeSuffix:
        for (size_t i = 0; i < tokens.size(); ++i) {
          const bool last = i + 1 == tokens.size() && !piece;
          next.push_back(ReplaceAllLiteral(tokens[i], step.content, last ? "" : " "));
        }
        break;
    }
    tokens = std::move(next);
  }
  return tokens;
}

std::string HfDecoder::Decode(std::vector<std::string> tokens) const {
  std::string text;
  if (!has_decoder_) {
    for (size_t i = 0; i < tokens.size(); ++i) text.append(i ? " " : "").append(tokens[i]);
    return text;
  }
  for (const std::string& t : Run(std::move(tokens), /*piece=*/false)) text += t;
  return text;
}

std::string HfDecoder::DecodePiece(std::string token) const {
  if (!has_decoder_) return token;
  std::string text;
  for (const std::string& t : Run({std::move(token)}, /*piece=*/true)) text += t;
  return text;
}

}  // namespace tandem
