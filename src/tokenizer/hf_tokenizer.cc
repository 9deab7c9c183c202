#include "tokenizer/hf_tokenizer.h"

#include "tokenizer/unicode_normalization.h"

namespace tandem {

HfTokenizer::HfTokenizer(Parts parts) : parts_(std::move(parts)) {}

std::vector<int32_t> HfTokenizer::Encode(std::string_view text, bool add_special,
                                         bool parse_special) const {
  const std::string valid = unicode::ToValidUtf8(text);
  std::vector<int32_t> ids;
  if (add_special) ids = parts_.prefix_ids;
  for (const HfAddedTokens::Piece& piece :
       parts_.added_tokens.Split(valid, /*normalized=*/false, parse_special)) {
    if (piece.token >= 0) {
      ids.push_back(piece.token);
    } else if (piece.end > piece.begin) {
      EncodeRun(std::string_view(valid).substr(piece.begin, piece.end - piece.begin),
                piece.begin == 0, parse_special, &ids);
    }
  }
  if (add_special) ids.insert(ids.end(), parts_.suffix_ids.begin(), parts_.suffix_ids.end());
  return ids;
}

void HfTokenizer::EncodeRun(std::string_view text, bool at_start, bool parse_special,
                            std::vector<int32_t>* out) const {
  bool keeps_start = true;
  const std::string normalized = parts_.normalizer.Normalize(text, &keeps_start);
  at_start = at_start && keeps_start;
  std::vector<HfWord> words;
  for (const HfAddedTokens::Piece& piece :
       parts_.added_tokens.Split(normalized, /*normalized=*/true, parse_special)) {
    if (piece.token >= 0) {
      // Flush the words before the token, then the token itself.
      parts_.pre_tokenizer.PreTokenize(&words);
      for (const HfWord& w : words) parts_.model->Encode(w.text, out);
      words.clear();
      out->push_back(piece.token);
    } else if (piece.end > piece.begin) {
      words.push_back(
          {normalized.substr(piece.begin, piece.end - piece.begin), at_start && piece.begin == 0});
    }
  }
  parts_.pre_tokenizer.PreTokenize(&words);
  for (const HfWord& w : words) parts_.model->Encode(w.text, out);
}

std::string HfTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  const int32_t n = static_cast<int32_t>(parts_.id_to_token.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n || parts_.id_to_token[id].empty()) continue;
    if (skip_special && parts_.is_special[id]) continue;
    tokens.push_back(parts_.id_to_token[id]);
  }
  return parts_.decoder.Decode(std::move(tokens));
}

std::string HfTokenizer::TokenToPiece(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(parts_.id_to_token.size())) return "";
  if (parts_.id_to_token[id].empty()) return "";
  return parts_.decoder.DecodePiece(parts_.id_to_token[id]);
}

}  // namespace tandem
