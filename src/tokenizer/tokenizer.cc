#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_token_splitter.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/unicode.h"

namespace tandem {
namespace {

constexpr std::string_view kSpmSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;
       pos = hit + from.size()) {
    out.append(text.substr(pos, hit - pos)).append(to);
  }
  out.append(text.substr(pos));
  return out;
}

// Byte-level BPE token text back to bytes. A code point outside GPT-2's byte map
// (not produced by real vocabs) is rendered the way llama.cpp renders it.
std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  for (uint32_t cpt : unicode::DecodeUtf8(text)) {
    const int byte = unicode::CodepointToByte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (char c : unicode::EncodeUtf8(cpt)) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out.append(text).append("]");
  }
  return out;
}

// llama_detokenize's clean_up_tokenization_spaces: three in-place passes over the
// text. Each mirrors llama.cpp's loop, including which bytes it looks at after
// earlier edits, because Decode must give the same bytes.
void CleanSpaces(std::string* text) {
  std::string& t = *text;
  // " ?" " !" " ." " ," lose the space.
  size_t total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  t.resize(total);
  // " ' " becomes "'". The byte after the apostrophe is zeroed and skipped, so the
  // next byte sees a NUL, not a space, before it.
  total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < t.size() && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  t.resize(total);
  // " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it).
  total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < t.size()) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < t.size()) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  }
  t.resize(total);
}


// Checks shared by both factories.
Status ValidateVocab(const Vocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return InvalidArgumentError("tokenizer: empty vocab");
  if (vocab.types.size() != n) {
    return InvalidArgumentError("tokenizer: " + std::to_string(vocab.types.size()) +
                                " token types for " + std::to_string(n) + " tokens");
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return InvalidArgumentError("tokenizer: " + std::to_string(vocab.scores.size()) +
                                " scores for " + std::to_string(n) + " tokens");
  }
  auto in_range = [&](int32_t id) { return id >= 0 && id < vocab.size(); };
  if (vocab.add_bos && !in_range(vocab.bos_id)) {
    return InvalidArgumentError("tokenizer: add_bos is set but the BOS id is not in the vocab");
  }
  if (vocab.add_eos && !in_range(vocab.eos_id)) {
    return InvalidArgumentError("tokenizer: add_eos is set but the EOS id is not in the vocab");
  }
  return Status::Ok();
}

void SortEogIds(Vocab* vocab) {
  std::sort(vocab->eog_ids.begin(), vocab->eog_ids.end());  // IsEog binary-searches
  vocab->eog_ids.erase(std::unique(vocab->eog_ids.begin(), vocab->eog_ids.end()),
                       vocab->eog_ids.end());
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  TANDEM_RETURN_IF_ERROR(ValidateVocab(vocab));
  PreTokenizer::Options bpe_options;
  if (vocab.model == "gpt2") {
    TANDEM_ASSIGN_OR_RETURN(bpe_options, PreTokenizer::OptionsForName(vocab.pre));
  } else if (vocab.model == "hf") {
    return InvalidArgumentError("tokenizer: a Hugging Face vocab comes with its pipeline "
                                "(LoadHfTokenizer)");
  } else if (vocab.model != "llama") {
    return UnimplementedError("tokenizer model '" + vocab.model +
                              "' is not supported (supported: llama (SentencePiece), "
                              "gpt2 (byte-level BPE))");
  }

  SortEogIds(&vocab);
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(vocab)));
  Tokenizer& t = *tokenizer;
  t.token_to_id_ = BuildTokenMap(t.vocab_);
  t.splitter_ = std::make_unique<SpecialTokenSplitter>(t.vocab_);
  if (t.vocab_.model == "llama") {
    t.spm_ = std::make_unique<SpmTokenizer>(t.vocab_, t.token_to_id_);
    t.clean_spaces_ = false;
  } else {
    t.bpe_ = std::make_unique<BpeTokenizer>(t.vocab_, t.token_to_id_, bpe_options);
    t.clean_spaces_ = bpe_options.clean_spaces;
  }
  return tokenizer;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::CreateHf(Vocab vocab,
                                                         std::unique_ptr<HfTokenizer> hf) {
  TANDEM_RETURN_IF_ERROR(ValidateVocab(vocab));
  if (hf == nullptr) return InvalidArgumentError("tokenizer: no Hugging Face pipeline");
  SortEogIds(&vocab);
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(vocab)));
  tokenizer->token_to_id_ = BuildTokenMap(tokenizer->vocab_);
  tokenizer->token_to_id_.erase("");  // ids no token has
  tokenizer->hf_ = std::move(hf);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  if (hf_) return hf_->Encode(text, add_special, parse_special);
  std::vector<int32_t> ids;
  if (add_special && vocab_.add_bos) ids.push_back(vocab_.bos_id);
  bool after_special = true;  // the start of the text counts as after a special token
  for (const TextFragment& fragment : splitter_->Split(text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
    } else {
      EncodeFragment(text.substr(fragment.offset, fragment.length), after_special, &ids);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos) ids.push_back(vocab_.eos_id);
  return ids;
}

void Tokenizer::EncodeFragment(std::string_view text, bool after_special,
                               std::vector<int32_t>* out) const {
  if (bpe_) {
    bpe_->Encode(text, out);
    return;
  }
  // SentencePiece: a space before text that follows a special token (or starts the
  // input) when the vocab asks for it, then spaces spelled as U+2581.
  std::string prefixed;
  if (vocab_.add_space_prefix && after_special) prefixed = " ";
  prefixed.append(text);
  spm_->Encode(ReplaceAll(prefixed, " ", kSpmSpace), out);
}

std::string Tokenizer::TokenToPiece(int32_t id, bool special) const {
  if (id < 0 || id >= vocab_.size()) return "";
  const std::string& text = vocab_.tokens[id];
  if (hf_) {
    const TokenType type = vocab_.types[id];
    if ((type == TokenType::kControl || type == TokenType::kUnknown) && !special) return "";
    return hf_->TokenToPiece(id);
  }
  switch (vocab_.types[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return special ? text : "";
    case TokenType::kUserDefined:
      return text;
    case TokenType::kNormal:
      return spm_ ? ReplaceAll(text, kSpmSpace, " ") : DecodeByteLevel(text);
    case TokenType::kByte:
      // "<0xXX>": llama.cpp reads the two hex digits at offset 3.
      return text.size() >= 5
                 ? std::string(
                       1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)))
                 : "";
    case TokenType::kUndefined:
    case TokenType::kUnused:
      return "";
  }
  return "";
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  if (hf_) return hf_->Decode(ids, skip_special);
  size_t begin = 0;
  size_t end = ids.size();
  bool strip_space = vocab_.add_space_prefix;  // the space Encode put before the text
  if (skip_special && vocab_.add_bos && end > begin && ids[begin] == vocab_.bos_id) {
    strip_space = false;  // llama.cpp keeps the space after a removed BOS
    ++begin;
  }
  if (skip_special && vocab_.add_eos && end > begin && ids[end - 1] == vocab_.eos_id) --end;

  std::string text;
  for (size_t i = begin; i < end; ++i) {
    std::string piece = TokenToPiece(ids[i], /*special=*/!skip_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    text += piece;
  }
  if (clean_spaces_) CleanSpaces(&text);
  return text;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(vocab_.eog_ids.begin(), vocab_.eog_ids.end(), id);
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  const int32_t id = LookupToken(token_to_id_, text);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace tandem
