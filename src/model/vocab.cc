// LoadVocab follows llama.cpp's llama_vocab::impl::load (llama-cpp-python 0.3.36):
// the same per-model defaults, the same handling of out-of-range special ids, and the
// same name-based fixups of token types and end-of-generation ids. Token types are
// stored *after* those fixups, so the tokenizer can treat `types` as llama.cpp's
// effective token attributes.
#include "model/vocab.h"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "model/model_source.h"

namespace tandem {
namespace {

constexpr int32_t kNoToken = -1;

// Pre-tokenizer names for which llama.cpp defaults add_bos to true (its LLAMA3 group).
bool IsLlama3FamilyPre(std::string_view pre) {
  static constexpr std::array<std::string_view, 9> kNames = {
      "llama3",  "llama-v3", "llama-bpe", "falcon3",     "falcon-h1",
      "pixtral", "midm-2.0", "lfm2",      "jina-v5-nano"};
  return std::find(kNames.begin(), kNames.end(), pre) != kNames.end();
}

using Names = std::vector<std::string_view>;

bool IsOneOf(std::string_view text, const Names& names) {
  return std::find(names.begin(), names.end(), text) != names.end();
}

// Position of `text` in `names`, or -1.
int IndexIn(std::string_view text, const Names& names) {
  const auto it = std::find(names.begin(), names.end(), text);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Texts llama.cpp recognizes as an end-of-turn token when no id is in the metadata,
// in llama.cpp's order (which we also use as the preference order).
const Names kEotTexts = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
const Names kEomTexts = {"<|eom_id|>"};

// Texts that end generation whatever the metadata says.
const Names kEogTexts = {"<|eot_id|>",
                         "<|im_end|>",
                         "<|end|>",
                         "<|return|>",
                         "<|call|>",
                         "<|flush|>",
                         "<|calls|>",
                         "<end_of_turn>",
                         "<|endoftext|>",
                         "</s>",
                         "<|eom_id|>",
                         "<EOT>",
                         "_<EOT>",
                         "[EOT]",
                         "[EOS]",
                         "<|end_of_text|>",
                         "<end_of_utterance>",
                         "<eos>",
                         "<turn|>",
                         "<|tool_response>",
                         "<｜end▁of▁sentence｜>",
                         "[e~["};

// gpt-oss structural tokens that must always be rendered.
const Names kAlwaysRenderedTexts = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

// Fill-in-the-middle tokens, auto-detected by text like the end-of-turn token.
struct FimKind {
  std::string_view key;  // metadata key of the id
  Names texts;
};
const FimKind kFimKinds[] = {
    {"tokenizer.ggml.fim_pre_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
      "<|code_prefix|>", "<|prefix|>"}},
    {"tokenizer.ggml.fim_suf_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
      "<|code_suffix|>", "<|suffix|>"}},
    {"tokenizer.ggml.fim_mid_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
      "<|code_middle|>", "<|middle|>"}},
    {"tokenizer.ggml.fim_pad_token_id",
     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id",
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
};

// Deprecated spellings of the first three FIM keys, still honoured.
const std::string_view kFimLegacyKeys[] = {"tokenizer.ggml.prefix_token_id",
                                           "tokenizer.ggml.suffix_token_id",
                                           "tokenizer.ggml.middle_token_id"};

// Overrides `*id` with the metadata value of `key` when present and in range.
Status ReadTokenId(const ModelSource& file, std::string_view key, int32_t n_tokens, int32_t* id) {
  if (*id >= n_tokens) *id = kNoToken;  // a default beyond the vocab is disabled
  if (!file.Find(key)) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(uint64_t value, file.GetUint(key));
  if (value >= static_cast<uint64_t>(n_tokens)) {
    TANDEM_LOG(WARNING) << "vocab: " << key << " = " << value << " is out of range, keeping "
                        << *id;
    return Status::Ok();
  }
  *id = static_cast<int32_t>(value);
  return Status::Ok();
}

// Tokens that look like end-of-turn/FIM/end-of-generation markers become control
// tokens, and the end-of-generation set is assembled (llama.cpp's text heuristics).
void ApplyNameFixups(int32_t eom_id, std::array<int32_t, 6> fim_ids, Vocab* vocab) {
  auto make_control = [&](int32_t id) { vocab->types[id] = TokenType::kControl; };
  // llama.cpp takes the first match in hash-map order, which is unspecified. We take
  // the candidate listed first (then the lowest id): deterministic, and the same pick
  // as llama.cpp's on the qwen2, llama3 and gemma3 vocabs (<|im_end|>, <|eot_id|>,
  // <end_of_turn> rather than <|endoftext|> / <|end_of_text|>).
  struct Pick {
    int32_t* id;
    const Names* texts;
    bool enabled;  // only when the metadata gave no id
    int best_index = INT32_MAX;
  };
  std::vector<Pick> picks;
  picks.push_back({&vocab->eot_id, &kEotTexts, vocab->eot_id == kNoToken});
  picks.push_back({&eom_id, &kEomTexts, eom_id == kNoToken});
  for (size_t k = 0; k < fim_ids.size(); ++k) {
    picks.push_back({&fim_ids[k], &kFimKinds[k].texts, fim_ids[k] == kNoToken});
  }
  for (int32_t id = 0; id < vocab->size(); ++id) {
    for (Pick& pick : picks) {
      const int index = pick.enabled ? IndexIn(vocab->tokens[id], *pick.texts) : -1;
      if (index >= 0 && index < pick.best_index) {
        pick.best_index = index;
        *pick.id = id;
      }
    }
  }
  for (const Pick& pick : picks) {
    if (pick.enabled && *pick.id != kNoToken) make_control(*pick.id);
  }

  std::set<int32_t> eog;
  for (size_t k = 3; k < fim_ids.size(); ++k) {  // FIM pad, repo and file-separator end output
    if (fim_ids[k] != kNoToken) eog.insert(fim_ids[k]);
  }
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string_view text = vocab->tokens[id];
    if (IsOneOf(text, kEogTexts)) {
      eog.insert(id);
      make_control(id);
    }
    if (IsOneOf(text, kAlwaysRenderedTexts)) {
      vocab->types[id] = TokenType::kUserDefined;
    }
  }
  for (int32_t id : {vocab->eos_id, vocab->eot_id, eom_id}) {
    if (id != kNoToken) eog.insert(id);
  }

  // With <|return|>+<|call|> (o200k_harmony) or <|calls|>+<|flush|> (solar-open),
  // <|end|> only ends a message, not the generation.
  auto find_eog = [&](std::string_view text) -> int32_t {
    for (int32_t id : eog) {
      if (vocab->tokens[id] == text) return id;
    }
    return kNoToken;
  };
  const int32_t end_id = find_eog("<|end|>");
  const bool has_call = find_eog("<|call|>") != kNoToken || find_eog("<|calls|>") != kNoToken;
  if (end_id != kNoToken && has_call &&
      (find_eog("<|return|>") != kNoToken || find_eog("<|flush|>") != kNoToken)) {
    eog.erase(end_id);
    vocab->types[end_id] = TokenType::kUserDefined;
  }
  // gemma4 and plamo use </s> as an ordinary token.
  const int32_t s_id = find_eog("</s>");
  if (s_id != kNoToken &&
      (find_eog("<|tool_response>") != kNoToken || find_eog("<|plamo:eos|>") != kNoToken)) {
    eog.erase(s_id);
    vocab->types[s_id] = TokenType::kNormal;
  }
  vocab->eog_ids.assign(eog.begin(), eog.end());
}

}  // namespace

StatusOr<Vocab> LoadVocab(const ModelSource& file) {
  Vocab vocab;
  TANDEM_ASSIGN_OR_RETURN(vocab.model, file.GetString("tokenizer.ggml.model"));
  TANDEM_ASSIGN_OR_RETURN(vocab.pre, file.GetStringOr("tokenizer.ggml.pre", ""));

  // Per-model defaults (llama.cpp's), overridden below by metadata where present.
  if (vocab.model == "llama") {  // SentencePiece
    vocab.bos_id = 1;
    vocab.eos_id = 2;
    vocab.unk_id = 0;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  } else if (vocab.model == "gpt2") {  // byte-level BPE
    vocab.bos_id = 11;
    vocab.eos_id = 11;
    vocab.add_bos = IsLlama3FamilyPre(vocab.pre);
  }
  TANDEM_ASSIGN_OR_RETURN(vocab.add_space_prefix, file.GetBoolOr("tokenizer.ggml.add_space_prefix",
                                                                 vocab.add_space_prefix));

  TANDEM_ASSIGN_OR_RETURN(vocab.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n_tokens = vocab.tokens.size();
  if (n_tokens == 0 || n_tokens > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("tokenizer.ggml.tokens: bad vocab size " +
                                std::to_string(n_tokens));
  }
  for (size_t i = 0; i < n_tokens; ++i) {
    // llama.cpp renames empty tokens so that every text maps back to one id.
    if (vocab.tokens[i].empty()) vocab.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }

  if (file.Find("tokenizer.ggml.scores")) {
    TANDEM_ASSIGN_OR_RETURN(vocab.scores, file.GetFloatArray("tokenizer.ggml.scores"));
    if (vocab.scores.size() != n_tokens) {
      return InvalidArgumentError("tokenizer.ggml.scores: " + std::to_string(vocab.scores.size()) +
                                  " entries for " + std::to_string(n_tokens) + " tokens");
    }
  }

  vocab.types.assign(n_tokens, TokenType::kNormal);
  if (file.Find("tokenizer.ggml.token_type")) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> types,
                            file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n_tokens) {
      return InvalidArgumentError("tokenizer.ggml.token_type: " + std::to_string(types.size()) +
                                  " entries for " + std::to_string(n_tokens) + " tokens");
    }
    for (size_t i = 0; i < n_tokens; ++i) {
      const bool known = types[i] >= 0 && types[i] <= static_cast<int64_t>(TokenType::kByte);
      vocab.types[i] = known ? static_cast<TokenType>(types[i]) : TokenType::kUndefined;
    }
  }

  if (file.Find("tokenizer.ggml.merges")) {
    TANDEM_ASSIGN_OR_RETURN(vocab.merges, file.GetStringArray("tokenizer.ggml.merges"));
  } else if (vocab.model == "gpt2") {
    return NotFoundError("tokenizer.ggml.merges: required for a gpt2 (BPE) tokenizer");
  }

  const int32_t n = vocab.size();
  int32_t eom_id = kNoToken;
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.bos_token_id", n, &vocab.bos_id));
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.eos_token_id", n, &vocab.eos_id));
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.eot_token_id", n, &vocab.eot_id));
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.eom_token_id", n, &eom_id));
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.unknown_token_id", n, &vocab.unk_id));
  TANDEM_RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.padding_token_id", n, &vocab.pad_id));
  std::array<int32_t, 6> fim_ids;
  fim_ids.fill(kNoToken);
  for (size_t k = 0; k < fim_ids.size(); ++k) {
    TANDEM_RETURN_IF_ERROR(ReadTokenId(file, kFimKinds[k].key, n, &fim_ids[k]));
    if (k < 3) TANDEM_RETURN_IF_ERROR(ReadTokenId(file, kFimLegacyKeys[k], n, &fim_ids[k]));
  }

  TANDEM_ASSIGN_OR_RETURN(vocab.add_bos,
                          file.GetBoolOr("tokenizer.ggml.add_bos_token", vocab.add_bos));
  TANDEM_ASSIGN_OR_RETURN(vocab.add_eos,
                          file.GetBoolOr("tokenizer.ggml.add_eos_token", vocab.add_eos));

  ApplyNameFixups(eom_id, fim_ids, &vocab);
  return vocab;
}

}  // namespace tandem
