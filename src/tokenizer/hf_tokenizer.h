// HfTokenizer: the Hugging Face tokenizer.json pipeline behind a Tokenizer built by
// LoadHfTokenizer (tokenizer/hf_tokenizer_json.h): added tokens -> normalizer ->
// pre-tokenizer -> BPE model -> post-processor on the way in, decoder on the way out,
// each step as the `tokenizers` package (0.23) defines it, so that ids and texts are the
// package's.
//
// Encoding: the input is made valid UTF-8 first (ill-formed bytes -> U+FFFD, as Python's
// errors="replace"); the raw added tokens are cut out of it, the rest is normalized,
// the normalized added tokens are cut out of that, and each remaining piece is
// pre-tokenized into words that the model encodes. With add_special the
// post-processor's tokens go around the ids.
//
// Ownership: owns every stage and its own copy of the token texts.
// Thread safety: immutable after construction; every const method may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_added_tokens.h"
#include "tokenizer/hf_bpe_model.h"
#include "tokenizer/hf_decoder.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/hf_pre_tokenizer.h"

namespace tandem {

class HfTokenizer {
 public:
  struct Parts {
    HfNormalizer normalizer;
    HfPreTokenizer pre_tokenizer;
    std::unique_ptr<HfBpeModel> model;  // required
    HfAddedTokens added_tokens;
    HfDecoder decoder;
    std::vector<int32_t> prefix_ids;       // post-processor: ids before the text's ...
    std::vector<int32_t> suffix_ids;       // ... and after them
    std::vector<std::string> id_to_token;  // [n_vocab]; "" where no token has the id
    std::vector<bool> is_special;          // [n_vocab]; special added tokens
  };

  explicit HfTokenizer(Parts parts);

  // tokenizers' encode(text, add_special_tokens=add_special).ids, with special added
  // tokens matched only when parse_special (else spelled out as text, as with
  // encode_special_tokens=True).
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // tokenizers' decode(ids, skip_special_tokens=skip_special); ids outside the vocab are
  // skipped.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const;

  // The bytes of one token as streamed output shows it (HfDecoder::DecodePiece); "" for
  // an id outside the vocab.
  std::string TokenToPiece(int32_t id) const;

  const std::vector<int32_t>& prefix_ids() const { return parts_.prefix_ids; }
  const std::vector<int32_t>& suffix_ids() const { return parts_.suffix_ids; }

 private:
  // Appends the ids of `text`, one run between raw added tokens.
  void EncodeRun(std::string_view text, bool at_start, bool parse_special,
                 std::vector<int32_t>* out) const;

  Parts parts_;
};

}  // namespace tandem
