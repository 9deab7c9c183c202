#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/json_depth.h"
#include "common/logging.h"
#include "tokenizer/hf_json_util.h"
#include "tokenizer/hf_pipeline_json.h"
#include "tokenizer/hf_tokenizer.h"

namespace tandem {
namespace {

using hf_json::Child;
using hf_json::Index;
using hf_json::Invalid;
using hf_json::Json;
using hf_json::Quote;

// tokenizer.json nests a few levels (a Sequence of Sequences at most in practice).
constexpr int kMaxDepth = 64;

// Added tokens that end generation, by text (llama.cpp's list, llama-vocab.cpp).
const char* const kEogTexts[] = {
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
};
// End-of-turn candidates in preference order (llama.cpp's).
const char* const kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};

StatusOr<Json> ParseJson(std::string_view text) {
  if (JsonNestingExceeds(text, kMaxDepth)) {
    return InvalidArgumentError("nests deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("is not valid JSON");
  if (!j.is_object()) return InvalidArgumentError("is not a JSON object");
  return j;
}

// The model section, read into what HfBpeModel::Create takes.
struct ModelSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  HfBpeModel::Options options;
};

StatusOr<ModelSpec> ParseModel(const Json& root) {
  const Json* model = hf_json::Find(root, "model");
  if (model == nullptr || !model->is_object()) return Invalid("model", "must be an object");
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> type,
                          hf_json::OptString(*model, "type", "model"));
  // Files from before the tagged format have no "type"; a BPE is the one with merges.
  const std::string t = type.value_or(hf_json::Find(*model, "merges") ? "BPE" : "");
  if (t != "BPE") {
    return Invalid("model.type", Quote(t) + " is not supported (only BPE models are)");
  }
  if (const Json* dropout = hf_json::Find(*model, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      return Invalid("model.dropout", "must be null (BPE dropout samples merges at random)");
    }
  }
  ModelSpec spec;
  HfBpeModel::Options& o = spec.options;
  TANDEM_ASSIGN_OR_RETURN(o.unk_token, hf_json::OptString(*model, "unk_token", "model"));
  TANDEM_ASSIGN_OR_RETURN(o.continuing_subword_prefix,
                          hf_json::OptString(*model, "continuing_subword_prefix", "model"));
  TANDEM_ASSIGN_OR_RETURN(o.end_of_word_suffix,
                          hf_json::OptString(*model, "end_of_word_suffix", "model"));
  TANDEM_ASSIGN_OR_RETURN(o.fuse_unk, hf_json::OptBool(*model, "fuse_unk", "model", false));
  TANDEM_ASSIGN_OR_RETURN(o.byte_fallback,
                          hf_json::OptBool(*model, "byte_fallback", "model", false));
  TANDEM_ASSIGN_OR_RETURN(o.ignore_merges,
                          hf_json::OptBool(*model, "ignore_merges", "model", false));

  const Json* vocab = hf_json::Find(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return Invalid("model.vocab", "must be an object");
  spec.vocab.reserve(vocab->size());
  for (const auto& [text, id] : vocab->items()) {
    TANDEM_ASSIGN_OR_RETURN(spec.vocab[text], hf_json::Id(id, "model.vocab." + Quote(text)));
  }
  const Json* merges = hf_json::Find(*model, "merges");
  if (merges != nullptr && !merges->is_array()) return Invalid("model.merges", "must be a list");
  if (merges != nullptr) {
    spec.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const Json& m = (*merges)[i];
      const std::string path = Index("model.merges", i);
      if (m.is_string()) {  // "left right", split at the first space
        const std::string& s = m.get_ref<const std::string&>();
        const size_t space = s.find(' ');
        if (space == std::string::npos) return Invalid(path, Quote(s) + " has no space");
        spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Invalid(path, "must be \"left right\" or [left, right]");
      }
    }
  }
  return spec;
}

StatusOr<std::vector<HfAddedToken>> ParseAddedTokens(const Json& root) {
  std::vector<HfAddedToken> tokens;
  const Json* list = hf_json::Find(root, "added_tokens");
  if (list == nullptr) return tokens;
  if (!list->is_array()) return Invalid("added_tokens", "must be a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& e = (*list)[i];
    const std::string path = Index("added_tokens", i);
    if (!e.is_object()) return Invalid(path, "must be an object");
    HfAddedToken t;
    const Json* id = hf_json::Find(e, "id");
    if (id == nullptr) return Invalid(Child(path, "id"), "is missing");
    TANDEM_ASSIGN_OR_RETURN(t.id, hf_json::Id(*id, Child(path, "id")));
    TANDEM_ASSIGN_OR_RETURN(t.content, hf_json::String(e, "content", path));
    TANDEM_ASSIGN_OR_RETURN(t.special, hf_json::OptBool(e, "special", path, false));
    TANDEM_ASSIGN_OR_RETURN(t.normalized, hf_json::OptBool(e, "normalized", path, !t.special));
    TANDEM_ASSIGN_OR_RETURN(t.lstrip, hf_json::OptBool(e, "lstrip", path, false));
    TANDEM_ASSIGN_OR_RETURN(t.rstrip, hf_json::OptBool(e, "rstrip", path, false));
    TANDEM_ASSIGN_OR_RETURN(t.single_word, hf_json::OptBool(e, "single_word", path, false));
    tokens.push_back(std::move(t));
  }
  return tokens;
}

bool IsByteToken(const std::string& text) {
  return text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(text[3])) &&
         std::isxdigit(static_cast<unsigned char>(text[4]));
}

// What tokenizer_config.json says about special tokens.
struct ConfigSpec {
  // For bos/eos/pad/unk: absent (no key: fall back), or the token text (nullopt: null).
  std::optional<std::optional<std::string>> bos, eos, pad, unk;
  std::optional<bool> add_bos, add_eos;
};

// A token setting: "text", {"content": "text", ...} or null.
StatusOr<std::optional<std::optional<std::string>>> ConfigToken(const Json& config,
                                                                const char* key) {
  if (!config.is_object()) return std::optional<std::optional<std::string>>();
  const auto it = config.find(key);
  if (it == config.end()) return std::optional<std::optional<std::string>>();
  if (it->is_null()) return std::optional<std::optional<std::string>>(std::optional<std::string>());
  if (it->is_string()) return std::optional<std::optional<std::string>>(it->get<std::string>());
  if (it->is_object()) {
    TANDEM_ASSIGN_OR_RETURN(std::string content, hf_json::String(*it, "content", key));
    return std::optional<std::optional<std::string>>(content);
  }
  return Invalid(key, "must be a string, {\"content\": ...} or null");
}

StatusOr<ConfigSpec> ParseConfig(std::string_view text) {
  ConfigSpec spec;
  if (text.empty()) return spec;
  TANDEM_ASSIGN_OR_RETURN(Json config, ParseJson(text));
  TANDEM_ASSIGN_OR_RETURN(spec.bos, ConfigToken(config, "bos_token"));
  TANDEM_ASSIGN_OR_RETURN(spec.eos, ConfigToken(config, "eos_token"));
  TANDEM_ASSIGN_OR_RETURN(spec.pad, ConfigToken(config, "pad_token"));
  TANDEM_ASSIGN_OR_RETURN(spec.unk, ConfigToken(config, "unk_token"));
  for (auto [key, out] :
       {std::pair{"add_bos_token", &spec.add_bos}, std::pair{"add_eos_token", &spec.add_eos}}) {
    if (const Json* v = hf_json::Find(config, key)) {
      if (!v->is_boolean()) return Invalid(key, "must be true or false");
      *out = v->get<bool>();
    }
  }
  return spec;
}

// Everything LoadHfTokenizer builds, before it becomes a Tokenizer.
struct Built {
  Vocab vocab;
  HfTokenizer::Parts parts;
};

// The tokenizer.json half: the vocab's tokens and types and the pipeline.
Status BuildFromTokenizerJson(const Json& root, Built* b) {
  TANDEM_ASSIGN_OR_RETURN(ModelSpec model, ParseModel(root));
  TANDEM_ASSIGN_OR_RETURN(std::vector<HfAddedToken> added, ParseAddedTokens(root));
  static const Json kNull;
  auto section = [&](const char* key) -> const Json& {
    const auto it = root.find(key);
    return it == root.end() ? kNull : *it;
  };
  TANDEM_ASSIGN_OR_RETURN(b->parts.normalizer,
                          ParseHfNormalizer(section("normalizer"), "normalizer"));
  TANDEM_ASSIGN_OR_RETURN(b->parts.pre_tokenizer,
                          ParseHfPreTokenizer(section("pre_tokenizer"), "pre_tokenizer"));
  TANDEM_ASSIGN_OR_RETURN(b->parts.decoder, ParseHfDecoder(section("decoder"), "decoder"));
  TANDEM_ASSIGN_OR_RETURN(HfPostProcessorIds post,
                          ParseHfPostProcessor(section("post_processor"), "post_processor"));
  b->parts.prefix_ids = std::move(post.prefix);
  b->parts.suffix_ids = std::move(post.suffix);
  for (const char* key : {"truncation", "padding"}) {
    if (!section(key).is_null()) {
      TANDEM_LOG(WARNING) << "tokenizer.json: " << key << " is set; Tandem does not apply it";
    }
  }

  // As in tokenizers, an added token whose text the model has takes the model's id.
  for (HfAddedToken& t : added) {
    const auto it = model.vocab.find(t.content);
    if (it != model.vocab.end()) t.id = it->second;
  }
  size_t entries = model.vocab.size() + added.size();
  int64_t max_id = -1;
  for (const auto& [text, id] : model.vocab) max_id = std::max<int64_t>(max_id, id);
  for (const HfAddedToken& t : added) max_id = std::max<int64_t>(max_id, t.id);
  if (max_id < 0) return Invalid("model.vocab", "is empty");
  // Ids far beyond the number of tokens would make a mostly empty table.
  if (static_cast<uint64_t>(max_id) >= 2 * entries + 1024) {
    return Invalid("model.vocab", "has ids up to " + std::to_string(max_id) + " for " +
                                      std::to_string(entries) + " tokens");
  }
  const size_t n = static_cast<size_t>(max_id) + 1;
  Vocab& v = b->vocab;
  v.model = "hf";
  v.tokens.assign(n, "");
  v.types.assign(n, TokenType::kUndefined);
  // Iterating a sorted map keeps the choice deterministic when two texts share an id.
  for (const auto& [text, id] :
       std::map<std::string, int32_t>(model.vocab.begin(), model.vocab.end())) {
    v.tokens[id] = text;
    v.types[id] =
        model.options.byte_fallback && IsByteToken(text) ? TokenType::kByte : TokenType::kNormal;
  }
  if (model.options.unk_token) {
    const auto it = model.vocab.find(*model.options.unk_token);
    if (it != model.vocab.end()) {
      v.unk_id = it->second;
      v.types[v.unk_id] = TokenType::kUnknown;
    }
  }
  std::vector<std::string> normalized_contents;
  for (const HfAddedToken& t : added) {
    v.tokens[t.id] = t.content;
    v.types[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
    normalized_contents.push_back(b->parts.normalizer.Normalize(t.content));
  }

  auto model_or = HfBpeModel::Create(std::move(model.vocab), model.merges, model.options);
  if (!model_or.ok()) return model_or.status().WithContext("model");
  b->parts.model = std::move(model_or).value();
  b->parts.id_to_token = v.tokens;
  // tokenizers decodes a normalized added token as its normalized content.
  for (size_t i = 0; i < added.size(); ++i) {
    if (added[i].normalized) b->parts.id_to_token[added[i].id] = normalized_contents[i];
  }
  b->parts.is_special.assign(n, false);
  for (const HfAddedToken& t : added) b->parts.is_special[t.id] = t.special;
  b->parts.added_tokens = HfAddedTokens(std::move(added), normalized_contents);

  for (const auto* ids : {&b->parts.prefix_ids, &b->parts.suffix_ids}) {
    for (int32_t id : *ids) {
      if (static_cast<size_t>(id) >= n || v.tokens[id].empty()) {
        return Invalid("post_processor", "adds id " + std::to_string(id) + ", which no token has");
      }
    }
  }
  return Status::Ok();
}

// The id of a token text (added tokens first, as tokenizers' token_to_id), or -1.
int32_t IdOf(const Built& b, const std::string& text) {
  for (const HfAddedToken& t : b.parts.added_tokens.tokens()) {
    if (t.content == text) return t.id;
  }
  return b.parts.model->TokenToId(text);
}

// The tokenizer_config.json half: special ids, add_bos / add_eos and the EOG set.
Status ApplyConfig(const ConfigSpec& config, const HfTokenizerOptions& opts, Built* b) {
  Vocab& v = b->vocab;
  auto resolve = [&](const std::optional<std::optional<std::string>>& setting, const char* key,
                     int32_t fallback) -> int32_t {
    if (!setting) return fallback;
    if (!*setting) return -1;
    const int32_t id = IdOf(*b, **setting);
    if (id < 0) {
      TANDEM_LOG(WARNING) << "tokenizer_config.json: " << key << " " << Quote(**setting)
                          << " is not a token; ignored";
    }
    return id;
  };
  std::vector<int32_t>& prefix = b->parts.prefix_ids;
  std::vector<int32_t>& suffix = b->parts.suffix_ids;
  v.bos_id = resolve(config.bos, "bos_token", prefix.size() == 1 ? prefix[0] : -1);
  v.eos_id = resolve(config.eos, "eos_token", suffix.size() == 1 ? suffix[0] : -1);
  v.pad_id = resolve(config.pad, "pad_token", -1);
  v.unk_id = resolve(config.unk, "unk_token", v.unk_id);
  if (config.add_bos) {
    prefix.clear();
    if (*config.add_bos && v.bos_id >= 0) prefix.push_back(v.bos_id);
  }
  if (config.add_eos) {
    suffix.clear();
    if (*config.add_eos && v.eos_id >= 0) suffix.push_back(v.eos_id);
  }
  v.add_bos = !prefix.empty() && prefix.front() == v.bos_id;
  v.add_eos = !suffix.empty() && suffix.back() == v.eos_id;

  std::set<int32_t> eog;
  if (v.eos_id >= 0) eog.insert(v.eos_id);
  for (int32_t id : opts.extra_eog_ids) {
    if (id < 0 || id >= v.size()) {
      return InvalidArgumentError("end-of-generation id " + std::to_string(id) +
                                  " is outside the vocab (" + std::to_string(v.size()) + " ids)");
    }
    eog.insert(id);
  }
  bool glm = false;
  for (const HfAddedToken& t : b->parts.added_tokens.tokens()) glm = glm || t.content == "[gMASK]";
  int eot_rank = INT32_MAX;
  for (const HfAddedToken& t : b->parts.added_tokens.tokens()) {
    for (const char* text : kEogTexts) {
      if (t.content == text) eog.insert(t.id);
    }
    if (glm && (t.content == "<|user|>" || t.content == "<|observation|>")) eog.insert(t.id);
    for (int rank = 0; rank < static_cast<int>(std::size(kEotTexts)); ++rank) {
      if (t.content == kEotTexts[rank] && rank < eot_rank) {
        eot_rank = rank;
        v.eot_id = t.id;
      }
    }
  }
  v.eog_ids.assign(eog.begin(), eog.end());
  return Status::Ok();
}

StatusOr<std::unique_ptr<Tokenizer>> Load(std::string_view tokenizer_json,
                                          std::string_view tokenizer_config_json,
                                          const HfTokenizerOptions& opts,
                                          const std::string& json_name,
                                          const std::string& config_name) {
  auto root = ParseJson(tokenizer_json);
  if (!root.ok()) return root.status().WithContext(json_name);
  Built b;
  if (Status s = BuildFromTokenizerJson(*root, &b); !s.ok()) return s.WithContext(json_name);
  auto config = ParseConfig(tokenizer_config_json);
  if (!config.ok()) return config.status().WithContext(config_name);
  TANDEM_RETURN_IF_ERROR(ApplyConfig(*config, opts, &b));
  auto tokenizer =
      Tokenizer::CreateHf(std::move(b.vocab), std::make_unique<HfTokenizer>(std::move(b.parts)));
  if (!tokenizer.ok()) return tokenizer.status().WithContext(json_name);
  return tokenizer;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFoundError(path + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec))
    return InvalidArgumentError(path + ": not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLossError(path + ": read failed");
  return ss.str();
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                     std::string_view tokenizer_config_json,
                                                     const HfTokenizerOptions& opts) {
  return Load(tokenizer_json, tokenizer_config_json, opts, "tokenizer.json",
              "tokenizer_config.json");
}

StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizerFiles(const std::string& tokenizer_json_path,
                                                          const std::string& tokenizer_config_path,
                                                          const HfTokenizerOptions& opts) {
  TANDEM_ASSIGN_OR_RETURN(std::string json, ReadFile(tokenizer_json_path));
  std::string config;
  if (!tokenizer_config_path.empty()) {
    auto read = ReadFile(tokenizer_config_path);
    if (read.ok()) {
      config = std::move(read).value();
    } else if (read.status().code() != StatusCode::kNotFound) {
      return read.status();
    }
  }
  return Load(json, config, opts, tokenizer_json_path, tokenizer_config_path);
}

}  // namespace tandem
