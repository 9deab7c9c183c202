// The pipeline components of a Hugging Face tokenizer.json read from their JSON: the
// normalizer, pre_tokenizer, decoder and post_processor objects (null: none). Every
// error is InvalidArgument naming the JSON path, e.g.
// `pre_tokenizer.pretokenizers[1].type "Foo" is not supported`. Internal to
// hf_tokenizer_json.cc.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/hf_decoder.h"
#include "tokenizer/hf_json_util.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/hf_pre_tokenizer.h"

namespace tandem {

// Supported: NFC, NFD, Lowercase, Strip, Replace, Prepend, Sequence.
StatusOr<HfNormalizer> ParseHfNormalizer(const hf_json::Json& j, const std::string& path);

// Supported: Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence.
StatusOr<HfPreTokenizer> ParseHfPreTokenizer(const hf_json::Json& j, const std::string& path);

// Supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, BPEDecoder, Sequence.
StatusOr<HfDecoder> ParseHfDecoder(const hf_json::Json& j, const std::string& path);

// The ids the post-processor puts around a single sequence when special tokens are added.
struct HfPostProcessorIds {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

// Supported: TemplateProcessing (its `single` template: special tokens, one $A, special
// tokens), BertProcessing and RobertaProcessing ([cls] $A [sep]), ByteLevel (adds
// nothing), Sequence. The ids are those the JSON gives; the caller checks their range.
StatusOr<HfPostProcessorIds> ParseHfPostProcessor(const hf_json::Json& j, const std::string& path);

}  // namespace tandem
