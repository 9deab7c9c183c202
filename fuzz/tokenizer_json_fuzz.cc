// libFuzzer target: Hugging Face tokenizer.json / tokenizer_config.json reading
// (LoadHfTokenizer) and, when the input loads, encoding and decoding with it. Any input
// must give a Status, never a crash; a tokenizer that loads must encode any bytes
// (ill-formed UTF-8 included) to ids inside its vocab, and decode any ids.
//
// The input is the tokenizer.json; it is also tried as the tokenizer_config.json of a
// small fixed tokenizer, and its own bytes are among the texts encoded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_tokenizer_json.h"

namespace {

constexpr std::string_view kFixedJson = R"({"added_tokens": [
    {"id": 5, "content": "<s>", "special": true, "normalized": false},
    {"id": 6, "content": "hi", "special": false, "normalized": true, "lstrip": true}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"}, "behavior": "Isolated"},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4},
            "merges": ["a b", "\u0120 a"]}})";

void Exercise(const tandem::Tokenizer& t, std::string_view input) {
  const std::string texts[] = {
      "",
      "Hello, world! 12345 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
      "  \t\n\r\n  spaces  ",
      "<s>hi<|endoftext|></s>[MASK]<unk>",
      "\xff\xfe\xc3(\xe2\x82\xf0\x9f\x98",  // ill-formed UTF-8
      std::string(input.substr(0, 512)),
  };
  const int32_t n = t.vocab().size();
  for (const std::string& text : texts) {
    for (bool parse_special : {true, false}) {
      const std::vector<int32_t> ids = t.Encode(text, /*add_special=*/true, parse_special);
      for (int32_t id : ids) {
        if (id < 0 || id >= n) std::abort();
      }
      (void)t.Decode(ids, /*skip_special=*/false);
      (void)t.Decode(ids, /*skip_special=*/true);
    }
  }
  const std::vector<int32_t> odd = {-1, 0, 1, n - 1, n, 2 * n + 7};
  (void)t.Decode(odd, false);
  for (int32_t id : odd) {
    (void)t.TokenToPiece(id, true);
    (void)t.IsEog(id);
  }
  (void)t.FindToken("a");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  tandem::HfTokenizerOptions opts;
  opts.extra_eog_ids = {0};
  if (auto t = tandem::LoadHfTokenizer(input, "", opts); t.ok()) Exercise(**t, input);
  if (auto t = tandem::LoadHfTokenizer(kFixedJson, input); t.ok()) Exercise(**t, input);
  return 0;
}
