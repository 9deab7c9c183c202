// HfCheckpoint::Open and the steps it takes: config.json, the architecture, the shards and
// their index, the quantization scheme (hf_checkpoint_builder.h says which file does what).
#include "model/hf_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "model/hf_checkpoint_builder.h"

namespace tandem {

bool IsHfCheckpointDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", ec);
}

namespace hf_internal {

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<Json> ReadJson(const fs::path& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(path.string() + " is not valid JSON");
  return j;
}

// j[key] when it is a string (else `fallback`): json::value() throws on another type.
std::string StrOf(const Json& j, const char* key, const std::string& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace hf_internal

namespace {

struct Family {
  const char* hf;    // config.json architectures[0]
  const char* arch;  // general.architecture
};

constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama"},          {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3"},          {"Gemma3ForCausalLM", "gemma3"},
    {"Qwen3MoeForCausalLM", "qwen3moe"},    {"Glm4MoeForCausalLM", "glm4moe"},
    {"DeepseekV2ForCausalLM", "deepseek2"}, {"DeepseekV3ForCausalLM", "deepseek2"},
    {"DeepseekV32ForCausalLM", "deepseek32"}, {"GlmMoeDsaForCausalLM", "glm-dsa"},
};

}  // namespace

using hf_internal::ReadFile;
using hf_internal::ReadJson;
using hf_internal::StrOf;
using Json = hf_internal::Json;
namespace fs = std::filesystem;

Status HfCheckpointBuilder::Build() {
  c_->path_ = dir_.string();
  TANDEM_ASSIGN_OR_RETURN(config_, ReadJson(dir_ / "config.json"));
  if (!config_.is_object()) return InvalidArgumentError(Where() + "is not a JSON object");
  TANDEM_RETURN_IF_ERROR(FindArchitecture());
  TANDEM_RETURN_IF_ERROR(OpenShards());
  TANDEM_RETURN_IF_ERROR(CheckQuantization());
  for (auto [name, out] : {std::pair<const char*, std::string*>{"tokenizer.json", &c_->tokenizer_json_},
                           {"tokenizer_config.json", &c_->tokenizer_config_},
                           {"generation_config.json", &c_->generation_config_}}) {
    std::error_code ec;
    if (fs::is_regular_file(dir_ / name, ec)) *out = (dir_ / name).string();
  }
  TANDEM_RETURN_IF_ERROR(AddConfigMetadata());
  TANDEM_RETURN_IF_ERROR(AddTensors());
  return AddTemplateMetadata();
}

const Json* HfCheckpointBuilder::Key(const char* key) const {
  auto it = config_.find(key);
  return it == config_.end() || it->is_null() ? nullptr : &*it;
}

StatusOr<int64_t> HfCheckpointBuilder::Int(const char* key) const {
  const Json* v = Key(key);
  if (v == nullptr) return NotFoundError(Where() + "key '" + key + "' is missing");
  if (!v->is_number_integer()) return InvalidArgumentError(Where() + "key '" + key + "' must be an integer");
  return v->get<int64_t>();
}

StatusOr<int64_t> HfCheckpointBuilder::IntOr(const char* key, int64_t fallback) const {
  if (Key(key) == nullptr) return fallback;
  return Int(key);
}

StatusOr<double> HfCheckpointBuilder::Number(const Json& obj, const char* key, const std::string& where) const {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) {
    return InvalidArgumentError(Where() + "key '" + where + key + "' must be a number");
  }
  return it->get<double>();
}

StatusOr<double> HfCheckpointBuilder::NumberOr(const char* key, double fallback) const {
  const Json* v = Key(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) return InvalidArgumentError(Where() + "key '" + key + "' must be a number");
  return v->get<double>();
}

StatusOr<bool> HfCheckpointBuilder::BoolOr(const char* key, bool fallback) const {
  const Json* v = Key(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return InvalidArgumentError(Where() + "key '" + key + "' must be true or false");
  return v->get<bool>();
}

StatusOr<std::string> HfCheckpointBuilder::StringOr(const char* key, std::string fallback) const {
  const Json* v = Key(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return InvalidArgumentError(Where() + "key '" + key + "' must be a string");
  return v->get<std::string>();
}

Status HfCheckpointBuilder::PutUint(const std::string& key, int64_t v) {
  if (v < 0) return InvalidArgumentError(Where() + "the value for " + key + " is negative");
  GgufValue g;
  g.type = GgufValueType::kUint32;
  g.u64 = static_cast<uint64_t>(v);
  return c_->AddMetadata(key, g);
}

Status HfCheckpointBuilder::PutFloat(const std::string& key, double v) {
  GgufValue g;
  g.type = GgufValueType::kFloat32;
  g.f64 = static_cast<float>(v);  // stored as float32, as the converter writes it
  return c_->AddMetadata(key, g);
}

Status HfCheckpointBuilder::PutBool(const std::string& key, bool v) {
  GgufValue g;
  g.type = GgufValueType::kBool;
  g.b = v;
  return c_->AddMetadata(key, g);
}

Status HfCheckpointBuilder::PutString(const std::string& key, std::string v) {
  GgufValue g;
  g.type = GgufValueType::kString;
  g.str = c_->KeepString(std::move(v));
  return c_->AddMetadata(key, g);
}

Status HfCheckpointBuilder::CopyInt(const char* hf, const char* suffix) {
  if (Key(hf) == nullptr) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(int64_t v, Int(hf));
  return PutUint(K(suffix), v);
}

Status HfCheckpointBuilder::FindArchitecture() {
  const Json* archs = Key("architectures");
  if (archs == nullptr || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return InvalidArgumentError(Where() + "key 'architectures' must be a non-empty list of strings");
  }
  c_->hf_arch_ = (*archs)[0].get<std::string>();
  std::string supported;
  for (const Family& f : kFamilies) {
    if (c_->hf_arch_ == f.hf) arch_ = f.arch;
    supported += (supported.empty() ? "" : ", ") + std::string(f.hf);
  }
  if (arch_.empty()) {
    return UnimplementedError(Where() + "architecture '" + c_->hf_arch_ +
                              "' is not supported (supported: " + supported + ")");
  }
  mla_ = arch_ == "deepseek2" || arch_ == "deepseek32" || arch_ == "glm-dsa";
  return Status::Ok();
}

Status HfCheckpointBuilder::OpenShards() {
  std::vector<fs::path> indexes, singles;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 23 && n.ends_with(".safetensors.index.json")) indexes.push_back(e.path());
    if (n.ends_with(".safetensors")) singles.push_back(e.path());
  }
  if (ec) return UnavailableError("cannot list " + dir_.string() + ": " + ec.message());
  std::sort(indexes.begin(), indexes.end());
  std::sort(singles.begin(), singles.end());
  std::vector<std::string> files;
  const SafetensorsIndex* index = nullptr;
  SafetensorsIndex parsed;
  if (!indexes.empty()) {
    if (indexes.size() > 1) {
      auto standard = std::find(indexes.begin(), indexes.end(), dir_ / "model.safetensors.index.json");
      if (standard == indexes.end()) {
        return InvalidArgumentError(dir_.string() + " holds several *.safetensors.index.json files (" +
                                    indexes[0].filename().string() + ", " + indexes[1].filename().string() +
                                    "); keep one");
      }
      indexes = {*standard};
    }
    TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFile(indexes[0]));
    TANDEM_ASSIGN_OR_RETURN(parsed, ParseSafetensorsIndex(text, indexes[0].string()));
    index = &parsed;
    files = parsed.shards();
  } else if (singles.size() == 1) {
    files = {singles[0].filename().string()};
  } else if (singles.empty()) {
    return NotFoundError(dir_.string() + " has config.json but no *.safetensors file");
  } else {
    return InvalidArgumentError(dir_.string() + " holds several *.safetensors files and no "
                                "*.safetensors.index.json saying which tensors each holds");
  }
  for (const std::string& f : files) {
    auto shard = SafetensorsFile::Open((dir_ / f).string());
    if (!shard.ok()) {
      if (shard.status().code() == StatusCode::kNotFound && index != nullptr) {
        return NotFoundError("shard " + f + " listed by " + indexes[0].filename().string() +
                             " is missing from " + dir_.string());
      }
      return shard.status();
    }
    const SafetensorsFile* s = shard->get();
    c_->size_ += s->file_size();
    for (const SafetensorsTensor& t : s->tensors()) {
      if (index != nullptr) {
        auto it = index->weight_map.find(t.name);
        if (it == index->weight_map.end() || it->second != f) continue;  // the index decides
      }
      if (!hf_.emplace(t.name, &t).second) {
        return InvalidArgumentError("tensor '" + t.name + "' is in more than one shard of " + dir_.string());
      }
    }
    c_->shards_.push_back(std::move(shard).value());
  }
  if (index != nullptr) {
    for (const auto& [name, file] : index->weight_map) {
      if (!hf_.count(name)) {
        return NotFoundError(indexes[0].filename().string() + " names tensor '" + name + "' in " + file +
                             ", which does not hold it");
      }
    }
  }
  return Status::Ok();
}

Status HfCheckpointBuilder::CheckQuantization() {
  std::error_code ec;
  const fs::path desc = dir_ / "quant_model_description.json";
  if (fs::is_regular_file(desc, ec)) {
    TANDEM_ASSIGN_OR_RETURN(Json d, ReadJson(desc));
    if (!d.is_object()) return InvalidArgumentError(desc.string() + " is not a JSON object");
    for (auto it = d.begin(); it != d.end(); ++it) {
      if (!it.value().is_string()) continue;  // e.g. version fields
      const std::string v = it.value().get<std::string>();
      if (it.key() == "model_quant_type" || it.key().find('.') == std::string::npos) continue;
      if (v != "FLOAT" && v != "W8A8" && v != "W8A8_DYNAMIC") {
        return UnimplementedError(desc.string() + ": tensor '" + it.key() + "' has scheme '" + v +
                                  "' (supported: W8A8_DYNAMIC, W8A8, FLOAT)");
      }
      description_[it.key()] = v;
    }
    quant_ = Quant::kModelSlim;
    return Status::Ok();
  }
  const Json* q = Key("quantization_config");
  if (q == nullptr) return Status::Ok();
  if (!q->is_object()) return InvalidArgumentError(Where() + "quantization_config must be an object");
  const std::string method = StrOf(*q, "quant_method");
  if (method == "compressed-tensors") {
    const std::string format = StrOf(*q, "format");
    if (format != "int-quantized") {
      return UnimplementedError(Where() + "compressed-tensors format '" + format +
                                "' is not supported (int-quantized W8A8)");
    }
    const Json groups = q->value("config_groups", Json::object());
    if (!groups.is_object() || groups.empty()) {
      return InvalidArgumentError(Where() + "quantization_config.config_groups must be a non-empty object");
    }
    for (auto g = groups.begin(); g != groups.end(); ++g) {
      const std::string where = "quantization_config.config_groups." + g.key();
      const Json& w = g.value().contains("weights") ? g.value()["weights"] : Json();
      const Json& a = g.value().contains("input_activations") ? g.value()["input_activations"] : Json();
      auto is = [](const Json& j, const char* key, const Json& want) { return j.is_object() && j.contains(key) && j[key] == want; };
      if (!(is(w, "num_bits", 8) && is(w, "type", "int") && is(w, "symmetric", true) && is(w, "strategy", "channel"))) {
        return UnimplementedError(Where() + where + ".weights is not supported (int8, symmetric, per channel): " +
                                  w.dump());
      }
      if (!(is(a, "num_bits", 8) && is(a, "type", "int") && is(a, "symmetric", true) && is(a, "dynamic", true) &&
            is(a, "strategy", "token"))) {
        return UnimplementedError(Where() + where + ".input_activations is not supported (int8, symmetric, "
                                  "dynamic per token): " + a.dump());
      }
    }
    quant_ = Quant::kCompressedTensors;
    return Status::Ok();
  }
  if (method == "fp8") {
    const Json bs = q->value("weight_block_size", Json());
    if (!bs.is_array() || bs.size() != 2 || !bs[0].is_number_integer() || !bs[1].is_number_integer() ||
        bs[0].get<int64_t>() < 1 || bs[1].get<int64_t>() < 1) {
      return UnimplementedError(Where() + "fp8 without a weight_block_size [rows, cols] is not supported "
                                "(block-scaled FP8, DeepSeek-V3 style)");
    }
    if (StrOf(*q, "fmt", "e4m3") != "e4m3") {
      return UnimplementedError(Where() + "fp8 fmt '" + StrOf(*q, "fmt") + "' is not supported (e4m3)");
    }
    fp8_block_[0] = bs[0].get<int64_t>();
    fp8_block_[1] = bs[1].get<int64_t>();
    quant_ = Quant::kFp8;
    return Status::Ok();
  }
  return UnimplementedError(Where() + "quantization_config.quant_method '" + method +
                            "' is not supported (compressed-tensors int-quantized W8A8, fp8 block-scaled, "
                            "or msmodelslim's quant_model_description.json)");
}
StatusOr<std::unique_ptr<HfCheckpoint>> HfCheckpoint::Open(const std::string& dir) {
  std::unique_ptr<HfCheckpoint> c(new HfCheckpoint());
  HfCheckpointBuilder b(c.get(), fs::path(dir));
  TANDEM_RETURN_IF_ERROR(b.Build());
  return c;
}

}  // namespace tandem
