#include "tokenizer/hf_pipeline_json.h"

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

using hf_json::Child;
using hf_json::Index;
using hf_json::Invalid;
using hf_json::Json;
using hf_json::Quote;
using hf_json::Unsupported;

// The members of a Sequence's list at `key`, each handled by `parse_one`.
template <typename ParseOne>
Status ForEachMember(const Json& j, const char* key, const std::string& path, ParseOne parse_one) {
  const Json* list = hf_json::Find(j, key);
  if (list == nullptr || !list->is_array()) return Invalid(Child(path, key), "must be a list");
  for (size_t i = 0; i < list->size(); ++i) {
    TANDEM_RETURN_IF_ERROR(parse_one((*list)[i], Index(Child(path, key), i)));
  }
  return Status::Ok();
}

// {"String": s} or {"Regex": r}.
StatusOr<HfPattern> ParsePattern(const Json& j, const std::string& path) {
  if (const Json* s = hf_json::Find(j, "String"); s != nullptr && s->is_string()) {
    return HfPattern::Literal(s->get<std::string>());
  }
  if (const Json* r = hf_json::Find(j, "Regex"); r != nullptr && r->is_string()) {
    auto pattern = HfPattern::Regex(r->get<std::string>());
    if (!pattern.ok()) return Invalid(Child(path, "Regex"), pattern.status().message());
    return pattern;
  }
  return Invalid(path, "must be {\"String\": ...} or {\"Regex\": ...}");
}

// One character (Metaspace's replacement, Strip's content).
StatusOr<std::string> OneChar(const Json& j, const char* key, const std::string& path,
                              const char* fallback) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> s, hf_json::OptString(j, key, path));
  const std::string c = s.value_or(fallback);
  if (unicode::DecodeUtf8(c).size() != 1) return Invalid(Child(path, key), "must be one character");
  return c;
}

StatusOr<HfPreTokenizer::PrependScheme> ParsePrependScheme(const Json& j, const std::string& path) {
  using Scheme = HfPreTokenizer::PrependScheme;
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> scheme,
                          hf_json::OptString(j, "prepend_scheme", path));
  if (!scheme) {  // files written before prepend_scheme: add_prefix_space
    TANDEM_ASSIGN_OR_RETURN(bool add, hf_json::OptBool(j, "add_prefix_space", path, true));
    return add ? Scheme::kAlways : Scheme::kNever;
  }
  if (*scheme == "always") return Scheme::kAlways;
  if (*scheme == "first") return Scheme::kFirst;
  if (*scheme == "never") return Scheme::kNever;
  return Invalid(Child(path, "prepend_scheme"), Quote(*scheme) + " is not always, first or never");
}

Status AddNormalizer(const Json& j, const std::string& path, std::vector<HfNormalizer::Step>* out) {
  using Kind = HfNormalizer::Step::Kind;
  TANDEM_ASSIGN_OR_RETURN(std::string type, hf_json::Type(j, path));
  HfNormalizer::Step step;
  if (type == "Sequence") {
    return ForEachMember(j, "normalizers", path, [&](const Json& m, const std::string& p) {
      return AddNormalizer(m, p, out);
    });
  } else if (type == "NFC") {
    step.kind = Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Kind::kNfd;
  } else if (type == "Lowercase") {
    step.kind = Kind::kLowercase;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    TANDEM_ASSIGN_OR_RETURN(step.strip_left, hf_json::OptBool(j, "strip_left", path, true));
    TANDEM_ASSIGN_OR_RETURN(step.strip_right, hf_json::OptBool(j, "strip_right", path, true));
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    const Json* pattern = hf_json::Find(j, "pattern");
    if (pattern == nullptr) return Invalid(Child(path, "pattern"), "is missing");
    TANDEM_ASSIGN_OR_RETURN(step.pattern, ParsePattern(*pattern, Child(path, "pattern")));
    TANDEM_ASSIGN_OR_RETURN(step.content, hf_json::String(j, "content", path));
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    TANDEM_ASSIGN_OR_RETURN(step.content, hf_json::String(j, "prepend", path));
  } else {
    return Unsupported(path, type);
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

StatusOr<HfPreTokenizer::Behavior> ParseBehavior(const Json& j, const std::string& path) {
  using Behavior = HfPreTokenizer::Behavior;
  TANDEM_ASSIGN_OR_RETURN(std::string b, hf_json::String(j, "behavior", path));
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return Invalid(Child(path, "behavior"), Quote(b) + " is not supported");
}

Status AddPreTokenizer(const Json& j, const std::string& path,
                       std::vector<HfPreTokenizer::Step>* out) {
  using Kind = HfPreTokenizer::Step::Kind;
  using Behavior = HfPreTokenizer::Behavior;
  TANDEM_ASSIGN_OR_RETURN(std::string type, hf_json::Type(j, path));
  HfPreTokenizer::Step step;
  if (type == "Sequence") {
    return ForEachMember(j, "pretokenizers", path, [&](const Json& m, const std::string& p) {
      return AddPreTokenizer(m, p, out);
    });
  } else if (type == "Split") {
    step.kind = Kind::kSplit;
    const Json* pattern = hf_json::Find(j, "pattern");
    if (pattern == nullptr) return Invalid(Child(path, "pattern"), "is missing");
    TANDEM_ASSIGN_OR_RETURN(step.pattern, ParsePattern(*pattern, Child(path, "pattern")));
    TANDEM_ASSIGN_OR_RETURN(step.behavior, ParseBehavior(j, path));
    TANDEM_ASSIGN_OR_RETURN(step.invert, hf_json::OptBool(j, "invert", path, false));
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    TANDEM_ASSIGN_OR_RETURN(step.add_prefix_space,
                            hf_json::OptBool(j, "add_prefix_space", path, true));
    TANDEM_ASSIGN_OR_RETURN(step.use_regex, hf_json::OptBool(j, "use_regex", path, true));
    if (step.use_regex) {
      TANDEM_ASSIGN_OR_RETURN(step.pattern, HfPattern::Regex(HfPreTokenizer::Gpt2Regex()));
    }
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    TANDEM_ASSIGN_OR_RETURN(step.replacement, OneChar(j, "replacement", path, "\xe2\x96\x81"));
    TANDEM_ASSIGN_OR_RETURN(step.prepend_scheme, ParsePrependScheme(j, path));
    TANDEM_ASSIGN_OR_RETURN(step.split, hf_json::OptBool(j, "split", path, true));
  } else if (type == "Digits") {
    step.kind = Kind::kDigits;
    TANDEM_ASSIGN_OR_RETURN(step.individual_digits,
                            hf_json::OptBool(j, "individual_digits", path, false));
  } else if (type == "Whitespace") {
    // tokenizers: the matches of \w+|[^\w\s]+ are the words, the rest is dropped.
    step.kind = Kind::kSplit;
    TANDEM_ASSIGN_OR_RETURN(step.pattern, HfPattern::Regex(R"(\w+|[^\w\s]+)"));
    step.behavior = Behavior::kRemoved;
    step.invert = true;
  } else if (type == "WhitespaceSplit") {
    step.kind = Kind::kSplit;
    TANDEM_ASSIGN_OR_RETURN(step.pattern, HfPattern::Regex(R"(\s)"));
    step.behavior = Behavior::kRemoved;
  } else {
    return Unsupported(path, type);
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

Status AddDecoder(const Json& j, const std::string& path, std::vector<HfDecoder::Step>* out) {
  using Kind = HfDecoder::Step::Kind;
  TANDEM_ASSIGN_OR_RETURN(std::string type, hf_json::Type(j, path));
  HfDecoder::Step step;
  if (type == "Sequence") {
    return ForEachMember(j, "decoders", path, [&](const Json& m, const std::string& p) {
      return AddDecoder(m, p, out);
    });
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    const Json* pattern = hf_json::Find(j, "pattern");
    if (pattern == nullptr) return Invalid(Child(path, "pattern"), "is missing");
    TANDEM_ASSIGN_OR_RETURN(step.pattern, ParsePattern(*pattern, Child(path, "pattern")));
    TANDEM_ASSIGN_OR_RETURN(step.content, hf_json::String(j, "content", path));
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    TANDEM_ASSIGN_OR_RETURN(step.content, OneChar(j, "content", path, " "));
    TANDEM_ASSIGN_OR_RETURN(step.start, hf_json::Count(j, "start", path, 0));
    TANDEM_ASSIGN_OR_RETURN(step.stop, hf_json::Count(j, "stop", path, 0));
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    TANDEM_ASSIGN_OR_RETURN(step.content, OneChar(j, "replacement", path, "\xe2\x96\x81"));
    TANDEM_ASSIGN_OR_RETURN(HfPreTokenizer::PrependScheme scheme, ParsePrependScheme(j, path));
    step.drop_first = scheme != HfPreTokenizer::PrependScheme::kNever;
  } else if (type == "BPEDecoder") {
    step.kind = Kind::kBpeSuffix;
    TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> suffix,
                            hf_json::OptString(j, "suffix", path));
    step.content = suffix.value_or("</w>");
  } else {
    return Unsupported(path, type);
  }
  out->push_back(std::move(step));
  return Status::Ok();
}

// One "single" template piece: a special token's ids, or the sequence $A.
Status AddTemplate(const Json& j, const std::string& path, HfPostProcessorIds* out) {
  const Json* single = hf_json::Find(j, "single");
  if (single == nullptr || !single->is_array())
    return Invalid(Child(path, "single"), "must be a list");
  const Json* specials = hf_json::Find(j, "special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& piece = (*single)[i];
    const std::string p = Index(Child(path, "single"), i);
    if (const Json* seq = hf_json::Find(piece, "Sequence")) {
      TANDEM_ASSIGN_OR_RETURN(std::string id, hf_json::String(*seq, "id", Child(p, "Sequence")));
      if (id != "A" || seen_sequence) {
        return Invalid(p, "uses sequence " + Quote(id) + " (only one $A is supported)");
      }
      seen_sequence = true;
      continue;
    }
    const Json* special = hf_json::Find(piece, "SpecialToken");
    if (special == nullptr) return Invalid(p, "must be a SpecialToken or a Sequence");
    TANDEM_ASSIGN_OR_RETURN(std::string name,
                            hf_json::String(*special, "id", Child(p, "SpecialToken")));
    const Json* entry = specials != nullptr ? hf_json::Find(*specials, name) : nullptr;
    const Json* ids = entry != nullptr ? hf_json::Find(*entry, "ids") : nullptr;
    const std::string ids_path = Child(Child(Child(path, "special_tokens"), name), "ids");
    if (ids == nullptr || !ids->is_array()) return Invalid(ids_path, "must be a list of ids");
    for (size_t k = 0; k < ids->size(); ++k) {
      TANDEM_ASSIGN_OR_RETURN(int32_t id, hf_json::Id((*ids)[k], Index(ids_path, k)));
      (seen_sequence ? out->suffix : out->prefix).push_back(id);
    }
  }
  if (!seen_sequence) return Invalid(Child(path, "single"), "has no $A");
  return Status::Ok();
}

// Bert/Roberta's "cls": [text, id] and "sep": [text, id].
StatusOr<int32_t> PairId(const Json& j, const char* key, const std::string& path) {
  const Json* v = hf_json::Find(j, key);
  if (v == nullptr || !v->is_array() || v->size() != 2) {
    return Invalid(Child(path, key), "must be [token, id]");
  }
  return hf_json::Id((*v)[1], Index(Child(path, key), 1));
}

Status AddPostProcessor(const Json& j, const std::string& path, HfPostProcessorIds* out) {
  TANDEM_ASSIGN_OR_RETURN(std::string type, hf_json::Type(j, path));
  if (type == "Sequence") {
    return ForEachMember(j, "processors", path, [&](const Json& m, const std::string& p) {
      return AddPostProcessor(m, p, out);
    });
  }
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "TemplateProcessing") {
    if (!out->prefix.empty() || !out->suffix.empty()) {
      return Invalid(path, "is a second processor that adds tokens");
    }
    return AddTemplate(j, path, out);
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    TANDEM_ASSIGN_OR_RETURN(int32_t cls, PairId(j, "cls", path));
    TANDEM_ASSIGN_OR_RETURN(int32_t sep, PairId(j, "sep", path));
    out->prefix = {cls};
    out->suffix = {sep};
    return Status::Ok();
  }
  return Unsupported(path, type);
}

}  // namespace

StatusOr<HfNormalizer> ParseHfNormalizer(const Json& j, const std::string& path) {
  std::vector<HfNormalizer::Step> steps;
  if (!j.is_null()) TANDEM_RETURN_IF_ERROR(AddNormalizer(j, path, &steps));
  return HfNormalizer(std::move(steps));
}

StatusOr<HfPreTokenizer> ParseHfPreTokenizer(const Json& j, const std::string& path) {
  std::vector<HfPreTokenizer::Step> steps;
  if (!j.is_null()) TANDEM_RETURN_IF_ERROR(AddPreTokenizer(j, path, &steps));
  return HfPreTokenizer(std::move(steps));
}

StatusOr<HfDecoder> ParseHfDecoder(const Json& j, const std::string& path) {
  if (j.is_null()) return HfDecoder();
  std::vector<HfDecoder::Step> steps;
  TANDEM_RETURN_IF_ERROR(AddDecoder(j, path, &steps));
  return HfDecoder(std::move(steps));
}

StatusOr<HfPostProcessorIds> ParseHfPostProcessor(const Json& j, const std::string& path) {
  HfPostProcessorIds ids;
  if (!j.is_null()) TANDEM_RETURN_IF_ERROR(AddPostProcessor(j, path, &ids));
  return ids;
}

}  // namespace tandem
