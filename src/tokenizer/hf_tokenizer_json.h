// LoadHfTokenizer: a Tokenizer (tokenizer/tokenizer.h) from a Hugging Face checkpoint's
// tokenizer.json, with the special-token settings of its tokenizer_config.json. The
// Tokenizer encodes and decodes as the Python `tokenizers` package does (HfTokenizer).
//
// Read from tokenizer.json (as `tokenizers` defines each part):
//   model           BPE: vocab, merges ("a b" or ["a", "b"]), unk_token, byte_fallback,
//                   fuse_unk, ignore_merges, continuing_subword_prefix,
//                   end_of_word_suffix; dropout null (or 0). Other model types
//                   (WordPiece, Unigram, WordLevel) are refused.
//   added_tokens    id, content, special, normalized, lstrip, rstrip, single_word.
//   normalizer      NFC, NFD, Lowercase, Strip, Replace, Prepend, Sequence.
//   pre_tokenizer   Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence.
//   post_processor  TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence.
//   decoder         ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder, Sequence.
// truncation and padding are ignored (logged when set). Anything else unknown is
// InvalidArgument naming its JSON path, e.g.
//   tokenizer.json: pre_tokenizer.pretokenizers[1].type "Foo" is not supported
//
// The Vocab (model "hf"): tokens by id, model vocab and added tokens (an id no token has
// is "" of type kUndefined); types kNormal, kByte for <0xXX> with byte_fallback, kUnknown
// for the model's unk_token, kControl for special added tokens and kUserDefined for the
// other added tokens. bos/eos/pad/unk ids from tokenizer_config.json's bos_token /
// eos_token / pad_token / unk_token (a string or {"content": ...}); without a config key,
// bos is the template's only leading token and eos its only trailing one, unk the model's
// unk_token. The ids around the text (Encode's add_special) are the post-processor's;
// tokenizer_config.json's add_bos_token / add_eos_token, when present, decide instead
// whether bos / eos are added (as transformers' Llama and Gemma tokenizers rebuild their
// template). add_bos / add_eos tell whether those ids begin with bos / end with eos.
// eog_ids: eos, the options' extra ids, and the added tokens llama.cpp ends generation on
// by name (<|eot_id|>, <|im_end|>, <|endoftext|>, <end_of_turn>, </s>, ..., and
// <|user|> / <|observation|> in GLM vocabs, which have [gMASK]).
//
// Thread safety: pure functions (the file variant reads the files).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

struct HfTokenizerOptions {
  // More end-of-generation ids, e.g. generation_config.json's eos_token_id list.
  std::vector<int32_t> extra_eog_ids;
};

// `tokenizer_config_json` may be empty (no config). Errors name "tokenizer.json" /
// "tokenizer_config.json".
StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                     std::string_view tokenizer_config_json,
                                                     const HfTokenizerOptions& opts = {});

// The same from files; errors name the paths. `tokenizer_config_path` may be "" or name
// a file that does not exist (no config); NotFound when tokenizer.json is missing.
StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizerFiles(const std::string& tokenizer_json_path,
                                                          const std::string& tokenizer_config_path,
                                                          const HfTokenizerOptions& opts = {});

}  // namespace tandem
