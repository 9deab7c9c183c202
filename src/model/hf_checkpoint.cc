#include "model/hf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/matmul.h"

namespace tandem {

bool IsHfCheckpointDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", ec);
}

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

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
std::string StrOf(const Json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool IsFloatDtype(SafetensorsDtype d) {
  return d == SafetensorsDtype::kF32 || d == SafetensorsDtype::kF16 || d == SafetensorsDtype::kBF16;
}

TensorType FloatType(SafetensorsDtype d) {
  return d == SafetensorsDtype::kF32 ? TensorType::kF32
                                     : d == SafetensorsDtype::kF16 ? TensorType::kF16 : TensorType::kBF16;
}

// Element i of a float tensor as float32 (exact for F16 / BF16).
float FloatAt(const SafetensorsTensor& t, int64_t i) {
  switch (t.dtype) {
    case SafetensorsDtype::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case SafetensorsDtype::kF16: {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      return Fp16ToFp32(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
  }
}

}  // namespace

// Fills an HfCheckpoint: the metadata from config.json, then the tensors.
class HfCheckpointBuilder {
 public:
  HfCheckpointBuilder(HfCheckpoint* ckpt, fs::path dir) : c_(ckpt), dir_(std::move(dir)) {}

  Status Build() {
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

 private:
  std::string Where() const { return (dir_ / "config.json").string() + ": "; }

  // ---- config.json access, errors naming the key ----------------------------------
  const Json* Key(const char* key) const {
    auto it = config_.find(key);
    return it == config_.end() || it->is_null() ? nullptr : &*it;
  }
  StatusOr<int64_t> Int(const char* key) const {
    const Json* v = Key(key);
    if (v == nullptr) return NotFoundError(Where() + "key '" + key + "' is missing");
    if (!v->is_number_integer()) return InvalidArgumentError(Where() + "key '" + key + "' must be an integer");
    return v->get<int64_t>();
  }
  StatusOr<int64_t> IntOr(const char* key, int64_t fallback) const {
    if (Key(key) == nullptr) return fallback;
    return Int(key);
  }
  StatusOr<double> Number(const Json& obj, const char* key, const std::string& where) const {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number()) {
      return InvalidArgumentError(Where() + "key '" + where + key + "' must be a number");
    }
    return it->get<double>();
  }
  StatusOr<double> NumberOr(const char* key, double fallback) const {
    const Json* v = Key(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) return InvalidArgumentError(Where() + "key '" + key + "' must be a number");
    return v->get<double>();
  }
  StatusOr<bool> BoolOr(const char* key, bool fallback) const {
    const Json* v = Key(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return InvalidArgumentError(Where() + "key '" + key + "' must be true or false");
    return v->get<bool>();
  }
  StatusOr<std::string> StringOr(const char* key, std::string fallback) const {
    const Json* v = Key(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) return InvalidArgumentError(Where() + "key '" + key + "' must be a string");
    return v->get<std::string>();
  }

  // ---- metadata ---------------------------------------------------------------------
  std::string K(const char* suffix) const { return arch_ + "." + suffix; }
  Status PutUint(const std::string& key, int64_t v) {
    if (v < 0) return InvalidArgumentError(Where() + "the value for " + key + " is negative");
    GgufValue g;
    g.type = GgufValueType::kUint32;
    g.u64 = static_cast<uint64_t>(v);
    return c_->AddMetadata(key, g);
  }
  Status PutFloat(const std::string& key, double v) {
    GgufValue g;
    g.type = GgufValueType::kFloat32;
    g.f64 = static_cast<float>(v);  // stored as float32, as the converter writes it
    return c_->AddMetadata(key, g);
  }
  Status PutBool(const std::string& key, bool v) {
    GgufValue g;
    g.type = GgufValueType::kBool;
    g.b = v;
    return c_->AddMetadata(key, g);
  }
  Status PutString(const std::string& key, std::string v) {
    GgufValue g;
    g.type = GgufValueType::kString;
    g.str = c_->KeepString(std::move(v));
    return c_->AddMetadata(key, g);
  }
  // An integer key of config.json copied to a GGUF key when present.
  Status CopyInt(const char* hf, const char* suffix) {
    if (Key(hf) == nullptr) return Status::Ok();
    TANDEM_ASSIGN_OR_RETURN(int64_t v, Int(hf));
    return PutUint(K(suffix), v);
  }

  Status FindArchitecture() {
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

  // ---- shards -----------------------------------------------------------------------
  Status OpenShards() {
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

  // The scheme, from quant_model_description.json (msmodelslim, the seeds' Ascend
  // format) or config.json's quantization_config; anything else is refused by name.
  Status CheckQuantization() {
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

  // ---- config.json -> GGUF keys (convert_hf_to_gguf.py's set_gguf_parameters) --------
  Status AddConfigMetadata() {
    TANDEM_RETURN_IF_ERROR(PutString("general.architecture", arch_));
    TANDEM_RETURN_IF_ERROR(PutString("general.name", dir_.filename().empty() ? dir_.parent_path().filename().string()
                                                                            : dir_.filename().string()));
    TANDEM_ASSIGN_OR_RETURN(n_layers_, Int("num_hidden_layers"));
    TANDEM_ASSIGN_OR_RETURN(int64_t nextn, IntOr("num_nextn_predict_layers", 0));
    if (n_layers_ < 1 || n_layers_ > 4096 || nextn < 0 || nextn > 16) {
      return InvalidArgumentError(Where() + "num_hidden_layers / num_nextn_predict_layers out of range");
    }
    // NextN layers are stored after the trunk as model.layers.{n_layers + i}; kept only
    // when the checkpoint has them.
    if (nextn > 0 && !hf_.count("model.layers." + std::to_string(n_layers_) + ".eh_proj.weight")) nextn = 0;
    n_nextn_ = nextn;
    TANDEM_RETURN_IF_ERROR(PutUint(K("block_count"), n_layers_ + n_nextn_));
    if (n_nextn_ > 0) TANDEM_RETURN_IF_ERROR(PutUint(K("nextn_predict_layers"), n_nextn_));
    TANDEM_ASSIGN_OR_RETURN(int64_t ctx, IntOr("max_position_embeddings", arch_ == "gemma3" ? 131072 : 0));
    if (ctx > 0) TANDEM_RETURN_IF_ERROR(PutUint(K("context_length"), ctx));
    TANDEM_ASSIGN_OR_RETURN(n_embd_, Int("hidden_size"));
    TANDEM_RETURN_IF_ERROR(PutUint(K("embedding_length"), n_embd_));
    TANDEM_ASSIGN_OR_RETURN(int64_t n_ff, IntOr("intermediate_size", 0));
    TANDEM_RETURN_IF_ERROR(PutUint(K("feed_forward_length"), n_ff));
    TANDEM_ASSIGN_OR_RETURN(n_head_, Int("num_attention_heads"));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.head_count"), n_head_));
    TANDEM_ASSIGN_OR_RETURN(n_head_kv_, IntOr("num_key_value_heads", n_head_));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.head_count_kv"), mla_ ? 1 : n_head_kv_));
    TANDEM_ASSIGN_OR_RETURN(double eps, NumberOr("rms_norm_eps", 1e-6));
    TANDEM_RETURN_IF_ERROR(PutFloat(K("attention.layer_norm_rms_epsilon"), eps));
    TANDEM_ASSIGN_OR_RETURN(c_->vocab_size_, Int("vocab_size"));
    if (n_embd_ < 1 || n_head_ < 1 || n_head_kv_ < 1 || c_->vocab_size_ < 1) {
      return InvalidArgumentError(Where() + "hidden_size, num_attention_heads, num_key_value_heads and "
                                  "vocab_size must be positive");
    }
    TANDEM_ASSIGN_OR_RETURN(tied_, BoolOr("tie_word_embeddings", arch_ == "gemma3"));
    TANDEM_ASSIGN_OR_RETURN(int64_t head_dim, IntOr("head_dim", arch_ == "gemma3" ? 256 : n_embd_ / n_head_));
    head_dim_ = head_dim;
    if (!mla_ && (Key("head_dim") != nullptr || arch_ == "gemma3")) {
      TANDEM_RETURN_IF_ERROR(PutUint(K("attention.key_length"), head_dim));
      TANDEM_RETURN_IF_ERROR(PutUint(K("attention.value_length"), head_dim));
    }
    TANDEM_RETURN_IF_ERROR(AddRopeMetadata());
    if (arch_ == "llama" || arch_ == "qwen2" || arch_ == "qwen3" || arch_ == "qwen3moe") {
      if (arch_ == "llama") TANDEM_RETURN_IF_ERROR(PutUint(K("rope.dimension_count"), head_dim));
    }
    if (arch_ == "gemma3") TANDEM_RETURN_IF_ERROR(AddGemma3Metadata());
    if (arch_ == "qwen3moe" || arch_ == "glm4moe" || mla_) TANDEM_RETURN_IF_ERROR(AddMoeMetadata());
    if (mla_) TANDEM_RETURN_IF_ERROR(AddMlaMetadata());
    return Status::Ok();
  }

  // rope_theta and rope_scaling (transformers' `rope_scaling`, or `rope_parameters`).
  Status AddRopeMetadata() {
    const Json* rp = Key("rope_parameters");
    const Json* rs = Key("rope_scaling");
    double theta_default = arch_ == "gemma3" ? 1000000.0 : 10000.0;
    double theta = theta_default;
    if (rp != nullptr && rp->is_object() && rp->contains("full_attention")) rp = &(*rp)["full_attention"];
    if (rp != nullptr && rp->is_object() && rp->contains("rope_theta")) {
      TANDEM_ASSIGN_OR_RETURN(theta, Number(*rp, "rope_theta", "rope_parameters."));
    } else {
      TANDEM_ASSIGN_OR_RETURN(theta, NumberOr("rope_theta", theta_default));
    }
    TANDEM_RETURN_IF_ERROR(PutFloat(K("rope.freq_base"), theta));
    const Json* scaling = rs != nullptr ? rs : (rp != nullptr && rp->contains("rope_type") ? rp : nullptr);
    if (scaling == nullptr) return Status::Ok();
    if (!scaling->is_object()) return InvalidArgumentError(Where() + "key 'rope_scaling' must be an object");
    std::string type;
    for (const char* k : {"rope_type", "type"}) {
      if (scaling->contains(k) && (*scaling)[k].is_string()) {
        type = (*scaling)[k].get<std::string>();
        break;
      }
    }
    const std::string where = rs != nullptr ? "rope_scaling." : "rope_parameters.";
    if (type.empty() || type == "default") return Status::Ok();
    if (type == "linear" || type == "yarn") {
      TANDEM_ASSIGN_OR_RETURN(double factor, Number(*scaling, "factor", where));
      TANDEM_RETURN_IF_ERROR(PutString(K("rope.scaling.type"), type));
      TANDEM_RETURN_IF_ERROR(PutFloat(K("rope.scaling.factor"), factor));
      if (type == "linear") return Status::Ok();
      TANDEM_ASSIGN_OR_RETURN(double orig, Number(*scaling, "original_max_position_embeddings", where));
      TANDEM_RETURN_IF_ERROR(PutUint(K("rope.scaling.original_context_length"), static_cast<int64_t>(orig)));
      for (auto [hf, gguf] : {std::pair<const char*, const char*>{"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
                              {"attention_factor", "rope.scaling.attn_factor"},
                              {"beta_fast", "rope.scaling.yarn_beta_fast"},
                              {"beta_slow", "rope.scaling.yarn_beta_slow"}}) {
        if (!scaling->contains(hf) || (*scaling)[hf].is_null()) continue;
        TANDEM_ASSIGN_OR_RETURN(double v, Number(*scaling, hf, where));
        TANDEM_RETURN_IF_ERROR(PutFloat(K(gguf), v));
      }
      if (mla_ && scaling->contains("mscale_all_dim") && !(*scaling)["mscale_all_dim"].is_null()) {
        TANDEM_ASSIGN_OR_RETURN(double m, Number(*scaling, "mscale_all_dim", where));
        // The converter's (legacy) 0.1 factor, which the deepseek2 loader cancels.
        TANDEM_RETURN_IF_ERROR(PutFloat(K("rope.scaling.yarn_log_multiplier"), 0.1 * m));
      }
      return Status::Ok();
    }
    if (type == "llama3") {
      if (arch_ != "llama") return UnimplementedError(Where() + where + "rope_type 'llama3' is for llama only");
      return Llama3RopeFactors(*scaling, where, theta);
    }
    return UnimplementedError(Where() + where + "rope_type '" + type + "' is not supported (linear, yarn)");
  }

  // Llama 3.1's rope_freqs.weight, as convert_hf_to_gguf.py computes it (in float32,
  // the order of its torch expressions; bit for bit against it on the llama fixture): for pair i, freq = 1 / base^(2i / dim), its
  // wavelength 2 pi / freq, then factor 1 below the high-frequency wavelength, `factor`
  // above the low-frequency one, and a smooth 1 / ((1 - s) / factor + s) between.
  Status Llama3RopeFactors(const Json& sc, const std::string& where, double theta) {
    auto get = [&](const char* key, double fallback) -> StatusOr<float> {
      if (!sc.contains(key) || sc[key].is_null()) return static_cast<float>(fallback);
      TANDEM_ASSIGN_OR_RETURN(double v, Number(sc, key, where));
      return static_cast<float>(v);
    };
    TANDEM_ASSIGN_OR_RETURN(float factor, get("factor", 8.0));
    TANDEM_ASSIGN_OR_RETURN(float low, get("low_freq_factor", 1.0));
    TANDEM_ASSIGN_OR_RETURN(float high, get("high_freq_factor", 4.0));
    TANDEM_ASSIGN_OR_RETURN(float old_ctx, get("original_max_position_embeddings", 8192));
    if (!(factor > 0) || !(low > 0) || !(high > low)) {
      return InvalidArgumentError(Where() + where + "llama3 needs factor > 0 and high_freq_factor > low_freq_factor > 0");
    }
    const int64_t dim = head_dim_;
    const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    std::vector<uint8_t> bytes(static_cast<size_t>(dim / 2) * 4);
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
      const float freq = 1.0f / std::pow(static_cast<float>(theta), exponent);
      // torch evaluates `2 * math.pi / freq` as reciprocal(freq) * 2 pi.
      const float wavelen = (1.0f / freq) * static_cast<float>(2 * M_PI);
      float f;
      if (wavelen < high_wavelen) {
        f = 1.0f;
      } else if (wavelen > low_wavelen) {
        f = factor;
      } else {
        const float smooth = (old_ctx / wavelen - low) / (high - low);
        f = 1.0f / ((1.0f - smooth) / factor + smooth);
      }
      std::memcpy(bytes.data() + i * 4, &f, 4);
    }
    Src s;
    s.name = "rope_scaling (llama3)";
    s.type = TensorType::kF32;
    return Emit("rope_freqs.weight", Owned(s, {dim / 2}, std::move(bytes)));
  }

  Status AddGemma3Metadata() {
    TANDEM_ASSIGN_OR_RETURN(int64_t window, IntOr("sliding_window", 0));
    TANDEM_ASSIGN_OR_RETURN(int64_t pattern, IntOr("sliding_window_pattern", 6));
    if (pattern != 1 && window > 0) TANDEM_RETURN_IF_ERROR(PutUint(K("attention.sliding_window"), window));
    if (pattern > 0) TANDEM_RETURN_IF_ERROR(PutUint(K("attention.sliding_window_pattern"), pattern));
    TANDEM_ASSIGN_OR_RETURN(double softcap, NumberOr("final_logit_softcapping", 0.0));
    if (softcap != 0) TANDEM_RETURN_IF_ERROR(PutFloat(K("final_logit_softcapping"), softcap));
    if (Key("attn_logit_softcapping") != nullptr) {
      return UnimplementedError(Where() + "attn_logit_softcapping is not supported (Gemma 3 has none)");
    }
    return Status::Ok();
  }

  Status AddMoeMetadata() {
    const char* n_expert_key = Key("num_experts") != nullptr ? "num_experts" : "n_routed_experts";
    TANDEM_ASSIGN_OR_RETURN(n_expert_, Int(n_expert_key));
    TANDEM_RETURN_IF_ERROR(PutUint(K("expert_count"), n_expert_));
    TANDEM_RETURN_IF_ERROR(CopyInt("num_experts_per_tok", "expert_used_count"));
    TANDEM_RETURN_IF_ERROR(CopyInt("moe_intermediate_size", "expert_feed_forward_length"));
    if (arch_ != "qwen3moe") {
      TANDEM_ASSIGN_OR_RETURN(int64_t shared, IntOr("n_shared_experts", 0));
      TANDEM_RETURN_IF_ERROR(PutUint(K("expert_shared_count"), shared));
      TANDEM_ASSIGN_OR_RETURN(int64_t dense, IntOr("first_k_dense_replace", 0));
      TANDEM_RETURN_IF_ERROR(PutUint(K("leading_dense_block_count"), dense));
      TANDEM_RETURN_IF_ERROR(CopyInt("n_group", "expert_group_count"));
      TANDEM_RETURN_IF_ERROR(CopyInt("topk_group", "expert_group_used_count"));
      if (Key("routed_scaling_factor") != nullptr) {
        TANDEM_ASSIGN_OR_RETURN(double s, NumberOr("routed_scaling_factor", 1.0));
        TANDEM_RETURN_IF_ERROR(PutFloat(K("expert_weights_scale"), s));
      }
      TANDEM_ASSIGN_OR_RETURN(bool norm, BoolOr("norm_topk_prob", false));
      if (norm || arch_ == "glm4moe") TANDEM_RETURN_IF_ERROR(PutBool(K("expert_weights_norm"), norm));
    }
    TANDEM_ASSIGN_OR_RETURN(std::string score, StringOr("scoring_func", ""));
    if (arch_ == "glm4moe") score = "sigmoid";
    if (score == "sigmoid") {
      TANDEM_RETURN_IF_ERROR(PutUint(K("expert_gating_func"), 2));
    } else if (score == "softmax") {
      TANDEM_RETURN_IF_ERROR(PutUint(K("expert_gating_func"), 1));
    } else if (!score.empty()) {
      return UnimplementedError(Where() + "scoring_func '" + score + "' is not supported (softmax, sigmoid)");
    }
    if (arch_ == "glm4moe") {
      TANDEM_ASSIGN_OR_RETURN(double partial, NumberOr("partial_rotary_factor", 0.5));
      TANDEM_RETURN_IF_ERROR(PutUint(K("rope.dimension_count"), static_cast<int64_t>(head_dim_ * partial)));
    }
    return Status::Ok();
  }

  Status AddMlaMetadata() {
    TANDEM_ASSIGN_OR_RETURN(int64_t kv_lora, IntOr("kv_lora_rank", 512));
    TANDEM_ASSIGN_OR_RETURN(int64_t rope, Int("qk_rope_head_dim"));
    TANDEM_ASSIGN_OR_RETURN(nope_, Int("qk_nope_head_dim"));
    TANDEM_ASSIGN_OR_RETURN(v_head_, Int("v_head_dim"));
    kv_lora_ = kv_lora;
    if (Key("q_lora_rank") != nullptr) TANDEM_RETURN_IF_ERROR(CopyInt("q_lora_rank", "attention.q_lora_rank"));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.kv_lora_rank"), kv_lora));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.key_length"), kv_lora + rope));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.value_length"), kv_lora));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.key_length_mla"), nope_ + rope));
    TANDEM_RETURN_IF_ERROR(PutUint(K("attention.value_length_mla"), v_head_));
    TANDEM_RETURN_IF_ERROR(PutUint(K("rope.dimension_count"), rope));
    if (arch_ == "deepseek32" || arch_ == "glm-dsa") {
      TANDEM_RETURN_IF_ERROR(CopyInt("index_n_heads", "attention.indexer.head_count"));
      TANDEM_RETURN_IF_ERROR(CopyInt("index_head_dim", "attention.indexer.key_length"));
      TANDEM_RETURN_IF_ERROR(CopyInt("index_topk", "attention.indexer.top_k"));
      if (const Json* types = Key("indexer_types"); types != nullptr && arch_ == "glm-dsa") {
        if (!types->is_array()) return InvalidArgumentError(Where() + "key 'indexer_types' must be a list");
        GgufValue g;
        g.type = GgufValueType::kArray;
        g.array_type = GgufValueType::kBool;
        for (const Json& t : *types) {
          GgufValue b;
          b.type = GgufValueType::kBool;
          b.b = t.is_string() && t.get<std::string>() == "full";
          g.array.push_back(b);
        }
        TANDEM_RETURN_IF_ERROR(c_->AddMetadata(K("attention.indexer.types"), std::move(g)));
      }
    }
    return Status::Ok();
  }

  // tokenizer.chat_template from tokenizer_config.json (a string, or a list of
  // {name, template} whose "default" entry is the template) or chat_template.jinja.
  Status AddTemplateMetadata() {
    std::error_code ec;
    const fs::path jinja = dir_ / "chat_template.jinja";
    if (fs::is_regular_file(jinja, ec)) {
      TANDEM_ASSIGN_OR_RETURN(std::string text, ReadFile(jinja));
      return PutString("tokenizer.chat_template", std::move(text));
    }
    if (c_->tokenizer_config_.empty()) return Status::Ok();
    TANDEM_ASSIGN_OR_RETURN(Json tc, ReadJson(c_->tokenizer_config_));
    if (!tc.is_object() || !tc.contains("chat_template") || tc["chat_template"].is_null()) return Status::Ok();
    const Json& t = tc["chat_template"];
    if (t.is_string()) return PutString("tokenizer.chat_template", t.get<std::string>());
    if (t.is_array()) {
      for (const Json& e : t) {
        if (e.is_object() && StrOf(e, "name") == "default" && e.contains("template") && e["template"].is_string()) {
          return PutString("tokenizer.chat_template", e["template"].get<std::string>());
        }
      }
    }
    return InvalidArgumentError(c_->tokenizer_config_ +
                                ": chat_template must be a string or a list holding a {\"name\": \"default\"} entry");
  }

  // ---- tensors ----------------------------------------------------------------------
  // A tensor as the transforms see it: HF's shape order ([rows, cols] or [n]), a
  // Tandem type, and for kI8Rows the per-row arrays (owned by the checkpoint).
  struct Src {
    std::string name;  // the HF name, for messages
    TensorType type = TensorType::kF32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    uint64_t begin = 0;  // offset in its shard (or a unique number for converted data)
    const float* scale = nullptr;
    const float* offset = nullptr;
    const int32_t* bias = nullptr;
    float act_scale = 0, act_offset = 0;

    int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 1 : shape[0]) : shape[1]; }
    int64_t row_bytes() const { return static_cast<int64_t>(bytes) / (shape.size() < 2 ? 1 : rows()); }
    bool is_float() const {
      return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
    }
  };

  // The HF tensor `hf_name` (nullptr if absent), marked as used.
  const SafetensorsTensor* Take(const std::string& hf_name) {
    auto it = hf_.find(hf_name);
    if (it == hf_.end()) return nullptr;
    used_.insert(hf_name);
    return it->second;
  }

  std::string ModuleOf(const std::string& weight_name) const {
    return weight_name.ends_with(".weight") ? weight_name.substr(0, weight_name.size() - 7) : weight_name;
  }
  const SafetensorsTensor* Companion(const std::string& module, const char* suffix) {
    return Take(module + "." + suffix);
  }
  // A small float tensor (scales, offsets) as float32 values; InvalidArgument unless it
  // holds `n` values (or one, broadcast, when `broadcast`).
  StatusOr<std::vector<float>> Floats(const SafetensorsTensor& t, int64_t n, bool broadcast) {
    if (!IsFloatDtype(t.dtype)) {
      return InvalidArgumentError("tensor '" + t.name + "' has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                                  ", expected F32, F16 or BF16");
    }
    if (t.num_elements != n && !(broadcast && t.num_elements == 1)) {
      return InvalidArgumentError("tensor '" + t.name + "' has " + std::to_string(t.num_elements) +
                                  " values, expected " + std::to_string(n));
    }
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[i] = FloatAt(t, t.num_elements == 1 ? 0 : i);
    return out;
  }
  const float* KeepFloats(std::vector<float> v) {
    c_->floats_.push_back(std::move(v));
    return c_->floats_.back().data();
  }

  // The tensor `hf_name` resolved to a type the kernels take: float as stored, int8
  // weights with their scales (compressed-tensors, msmodelslim), FP8 block-scaled
  // weights dequantized and stored as Q8_0 (F32 when a row is not whole 32-blocks).
  StatusOr<Src> Resolve(const SafetensorsTensor& t) {
    Src s;
    s.name = t.name;
    s.shape = t.shape;
    s.data = t.data;
    s.bytes = t.size_bytes();
    s.begin = t.begin;
    if (IsFloatDtype(t.dtype)) {
      s.type = FloatType(t.dtype);
      return s;
    }
    const std::string module = ModuleOf(t.name);
    if (t.dtype == SafetensorsDtype::kI8 && quant_ != Quant::kNone && quant_ != Quant::kFp8) {
      if (t.shape.size() != 2) return InvalidArgumentError("int8 tensor '" + t.name + "' is not a matrix");
      const int64_t rows = t.shape[0];
      s.type = TensorType::kI8Rows;
      std::string scheme = "W8A8_DYNAMIC";
      if (quant_ == Quant::kModelSlim) {
        auto it = description_.find(t.name);
        scheme = it != description_.end() ? it->second : "";
        if (scheme != "W8A8_DYNAMIC" && scheme != "W8A8") {
          return UnimplementedError((dir_ / "quant_model_description.json").string() + ": tensor '" + t.name +
                                    "' is int8 with scheme '" + scheme +
                                    "' (supported: W8A8_DYNAMIC, W8A8, FLOAT)");
        }
      }
      if (scheme == "W8A8") {  // msmodelslim static
        const SafetensorsTensor* deq = Companion(module, "deq_scale");
        const SafetensorsTensor* qb = Companion(module, "quant_bias");
        const SafetensorsTensor* is = Companion(module, "input_scale");
        const SafetensorsTensor* io = Companion(module, "input_offset");
        if (deq == nullptr || is == nullptr || io == nullptr) {
          return NotFoundError(dir_.string() + ": W8A8 tensor '" + t.name +
                               "' lacks its deq_scale, input_scale or input_offset");
        }
        std::vector<float> d(static_cast<size_t>(rows));
        if (deq->num_elements != rows) {
          return InvalidArgumentError("tensor '" + deq->name + "' has " + std::to_string(deq->num_elements) +
                                      " values, expected " + std::to_string(rows));
        }
        if (deq->dtype == SafetensorsDtype::kI64) {  // fp32 bits in the low 32 bits
          for (int64_t r = 0; r < rows; ++r) {
            uint32_t bits;
            std::memcpy(&bits, deq->data + r * 8, 4);
            std::memcpy(&d[r], &bits, 4);
          }
        } else {
          TANDEM_ASSIGN_OR_RETURN(d, Floats(*deq, rows, false));
        }
        s.scale = KeepFloats(std::move(d));
        if (qb != nullptr) {
          if (qb->dtype != SafetensorsDtype::kI32 || qb->num_elements != rows) {
            return InvalidArgumentError("tensor '" + qb->name + "' must be I32 with " + std::to_string(rows) + " values");
          }
          std::vector<int32_t> b(static_cast<size_t>(rows));
          std::memcpy(b.data(), qb->data, static_cast<size_t>(rows) * 4);
          c_->ints_.push_back(std::move(b));
          s.bias = c_->ints_.back().data();
        }
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> sc, Floats(*is, 1, true));
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> of, Floats(*io, 1, true));
        if (!(sc[0] > 0) || !std::isfinite(sc[0])) {
          return InvalidArgumentError("tensor '" + is->name + "' must be a positive scale");
        }
        s.act_scale = sc[0];
        s.act_offset = of[0];
        // The weight's own scale / offset, which deq_scale and quant_bias already hold.
        Companion(module, "weight_scale");
        Companion(module, "weight_offset");
        ++int8_static_;
        return s;
      }
      const SafetensorsTensor* ws = Companion(module, "weight_scale");
      if (ws == nullptr) return NotFoundError(dir_.string() + ": int8 tensor '" + t.name + "' lacks " + module + ".weight_scale");
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> sc, Floats(*ws, rows, false));
      s.scale = KeepFloats(std::move(sc));
      if (const SafetensorsTensor* wo = Companion(module, "weight_offset")) {
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> of, Floats(*wo, rows, false));
        if (std::any_of(of.begin(), of.end(), [](float v) { return v != 0; })) s.offset = KeepFloats(std::move(of));
      }
      ++int8_dynamic_;
      return s;
    }
    if (t.dtype == SafetensorsDtype::kF8E4M3 && quant_ == Quant::kFp8) return DequantizeFp8(t, module);
    std::string hint = quant_ == Quant::kNone ? " (config.json has no quantization_config saying how to read it)" : "";
    return UnimplementedError("tensor '" + t.name + "' has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                              " which Tandem cannot compute with" + hint);
  }

  // e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7f / 0xff are NaN.
  static float Fp8E4M3(uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
    float v;
    if (exp == 0) {
      v = std::ldexp(static_cast<float>(man) / 8.0f, -6);
    } else if (exp == 15 && man == 7) {
      v = std::nanf("");
    } else {
      v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
    }
    return sign ? -v : v;
  }

  // FP8 block-scaled (DeepSeek-V3 style): w = fp8 x weight_scale_inv[r / bs0][c / bs1].
  StatusOr<Src> DequantizeFp8(const SafetensorsTensor& t, const std::string& module) {
    if (t.shape.size() != 2) return InvalidArgumentError("FP8 tensor '" + t.name + "' is not a matrix");
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const SafetensorsTensor* inv = Companion(module, "weight_scale_inv");
    if (inv == nullptr) return NotFoundError(dir_.string() + ": FP8 tensor '" + t.name + "' lacks " + module + ".weight_scale_inv");
    const int64_t br = (rows + fp8_block_[0] - 1) / fp8_block_[0], bc = (cols + fp8_block_[1] - 1) / fp8_block_[1];
    if (inv->shape.size() != 2 || inv->shape[0] != br || inv->shape[1] != bc) {
      return InvalidArgumentError("tensor '" + inv->name + "' must have shape [" + std::to_string(br) + ", " +
                                  std::to_string(bc) + "] for blocks of " + std::to_string(fp8_block_[0]) + "x" +
                                  std::to_string(fp8_block_[1]));
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> scales, Floats(*inv, br * bc, false));
    const bool q8 = cols % 32 == 0;
    const int64_t out_row = q8 ? *RowBytes(TensorType::kQ8_0, cols) : cols * 4;
    std::vector<uint8_t> out(static_cast<size_t>(rows * out_row));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        row[c] = Fp8E4M3(t.data[r * cols + c]) * scales[(r / fp8_block_[0]) * bc + c / fp8_block_[1]];
      }
      if (q8) {
        QuantizeRowQ8_0(row.data(), out.data() + r * out_row, cols);
      } else {
        std::memcpy(out.data() + r * out_row, row.data(), static_cast<size_t>(cols) * 4);
      }
    }
    ++fp8_;
    c_->buffers_.push_back(std::move(out));
    Src s;
    s.name = t.name;
    s.type = q8 ? TensorType::kQ8_0 : TensorType::kF32;
    s.shape = t.shape;
    s.data = c_->buffers_.back().data();
    s.bytes = c_->buffers_.back().size();
    s.begin = t.begin;
    return s;
  }

  const Int8RowParams* KeepParams(const Src& s, int64_t row0) {
    Int8RowParams p;
    p.scale = s.scale ? s.scale + row0 : nullptr;
    p.offset = s.offset ? s.offset + row0 : nullptr;
    p.bias = s.bias ? s.bias + row0 : nullptr;
    p.act_scale = s.act_scale;
    p.act_offset = s.act_offset;
    c_->params_.push_back(p);
    return &c_->params_.back();
  }

  // Adds `s` as GGUF tensor `gguf_name` (dims reversed: the row length first). A stack
  // of `n_matrices` > 1 gets one Int8RowParams per matrix (kI8Rows).
  Status Emit(const std::string& gguf_name, const Src& s, std::vector<int64_t> dims = {}) {
    GgufTensorInfo g;
    g.name = gguf_name;
    g.type = s.type;
    g.dims = dims.empty() ? std::vector<int64_t>(s.shape.rbegin(), s.shape.rend()) : std::move(dims);
    if (g.dims.empty()) g.dims.push_back(1);
    g.num_elements = 1;
    for (int64_t d : g.dims) g.num_elements *= d;
    g.data = s.data;
    g.size_bytes = s.bytes;
    g.offset = s.begin;
    if (s.type == TensorType::kI8Rows) {
      g.i8 = g.dims.size() == 3 ? KeepParamArray(s, g.dims[2], g.dims[1]) : KeepParams(s, 0);
    }
    return c_->AddTensor(std::move(g));
  }
  // n Int8RowParams in one array (a stack's At(i) indexes it).
  const Int8RowParams* KeepParamArray(const Src& s, int64_t n, int64_t rows_each) {
    std::vector<Int8RowParams> a(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      a[i].scale = s.scale ? s.scale + i * rows_each : nullptr;
      a[i].offset = s.offset ? s.offset + i * rows_each : nullptr;
      a[i].bias = s.bias ? s.bias + i * rows_each : nullptr;
      a[i].act_scale = s.act_scale;
      a[i].act_offset = s.act_offset;
    }
    c_->param_arrays_.push_back(std::move(a));
    return c_->param_arrays_.back().data();
  }

  // Keeps converted bytes; returns a Src over them with `like`'s type and arrays.
  Src Owned(const Src& like, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    c_->buffers_.push_back(std::move(bytes));
    Src s = like;
    s.shape = std::move(shape);
    s.data = c_->buffers_.back().data();
    s.bytes = c_->buffers_.back().size();
    s.begin = (uint64_t{1} << 62) + c_->buffers_.size();  // not a file offset: unique
    return s;
  }

  // Row r of `s` as float32 values.
  void RowAsFloat(const Src& s, int64_t r, float* out) const {
    const int64_t cols = s.cols();
    const uint8_t* row = s.data + r * s.row_bytes();
    if (s.type == TensorType::kI8Rows) {
      const float off = s.offset ? s.offset[r] : 0.0f;
      for (int64_t c = 0; c < cols; ++c) {
        const float q = static_cast<float>(static_cast<int8_t>(row[c]));
        out[c] = s.act_scale > 0 ? q * s.scale[r] / s.act_scale : (q - off) * s.scale[r];
      }
      return;
    }
    DequantizeRow(s.type, row, out, cols);
  }

  // `s` widened to F32 values plus `shift` (Gemma's norm + 1; routers as the converter
  // writes them).
  Src AsF32(const Src& s, float shift) {
    const int64_t rows = s.shape.size() < 2 ? 1 : s.rows(), cols = s.cols();
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols) * 4);
    for (int64_t r = 0; r < rows; ++r) {
      float* out = reinterpret_cast<float*>(bytes.data()) + r * cols;
      RowAsFloat(s, r, out);
      for (int64_t c = 0; c < cols; ++c) out[c] += shift;
    }
    Src f = s;
    f.type = TensorType::kF32;
    f.scale = f.offset = nullptr;
    f.bias = nullptr;
    f.act_scale = f.act_offset = 0;
    return Owned(f, s.shape, std::move(bytes));
  }

  // Rows gathered in `order` (and the per-row arrays with them).
  Src GatherRows(const Src& s, const std::vector<int64_t>& order) {
    const int64_t rb = s.row_bytes();
    std::vector<uint8_t> bytes(s.bytes);
    for (size_t i = 0; i < order.size(); ++i) std::memcpy(bytes.data() + i * rb, s.data + order[i] * rb, rb);
    Src out = Owned(s, s.shape, std::move(bytes));
    auto gather_f = [&](const float* a) -> const float* {
      if (a == nullptr) return nullptr;
      std::vector<float> v(order.size());
      for (size_t i = 0; i < order.size(); ++i) v[i] = a[order[i]];
      return KeepFloats(std::move(v));
    };
    out.scale = gather_f(s.scale);
    out.offset = gather_f(s.offset);
    if (s.bias != nullptr) {
      std::vector<int32_t> v(order.size());
      for (size_t i = 0; i < order.size(); ++i) v[i] = s.bias[order[i]];
      c_->ints_.push_back(std::move(v));
      out.bias = c_->ints_.back().data();
    }
    return out;
  }

  // llama's q/k rows (or bias) from HF's rotate-half order to GGUF's adjacent pairs:
  // reshape(n_head, 2, rows / n_head / 2, ...).swapaxes(1, 2).
  StatusOr<Src> Permuted(const Src& s, int64_t n_head) {
    const int64_t rows = s.rows();
    if (rows % (2 * n_head) != 0) {
      return InvalidArgumentError("tensor '" + s.name + "' has " + std::to_string(rows) +
                                  " rows, not a multiple of 2 x " + std::to_string(n_head) + " heads");
    }
    const int64_t per_head = rows / n_head, half = per_head / 2;
    std::vector<int64_t> order(static_cast<size_t>(rows));
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j) order[h * per_head + i * 2 + j] = h * per_head + j * half + i;
    ++permuted_;
    return GatherRows(s, order);
  }

  // Per-expert matrices [rows, cols] stacked into one GGUF tensor {cols, rows, n}.
  Status Stacked(const std::string& gguf_name, const std::vector<Src>& parts) {
    const Src& first = parts[0];
    if (first.shape.size() != 2) return InvalidArgumentError("tensor '" + first.name + "' is not a matrix");
    if (first.type == TensorType::kI8Rows && first.act_scale > 0) {
      // An MoE layer quantizes each token once for all its experts (dynamic); msmodelslim
      // writes experts as W8A8_DYNAMIC.
      return UnimplementedError("expert tensor '" + first.name +
                                "' is static W8A8 (per-tensor activation scales): experts are supported as "
                                "W8A8_DYNAMIC or float");
    }
    std::vector<uint8_t> bytes;
    bytes.reserve(first.bytes * parts.size());
    std::vector<float> scale, offset;
    std::vector<int32_t> bias;
    for (const Src& p : parts) {
      if (p.type != first.type || p.shape != first.shape || (p.offset == nullptr) != (first.offset == nullptr) ||
          (p.bias == nullptr) != (first.bias == nullptr) || p.act_scale != first.act_scale ||
          p.act_offset != first.act_offset) {
        return InvalidArgumentError("expert tensor '" + p.name + "' differs in type, shape or quantization from '" +
                                    first.name + "'");
      }
      bytes.insert(bytes.end(), p.data, p.data + p.bytes);
      if (p.scale) scale.insert(scale.end(), p.scale, p.scale + p.rows());
      if (p.offset) offset.insert(offset.end(), p.offset, p.offset + p.rows());
      if (p.bias) bias.insert(bias.end(), p.bias, p.bias + p.rows());
    }
    ++stacked_;
    stacked_bytes_ += static_cast<int64_t>(bytes.size());
    Src s = Owned(first, {static_cast<int64_t>(parts.size()) * first.rows(), first.cols()}, std::move(bytes));
    s.scale = scale.empty() ? nullptr : KeepFloats(std::move(scale));
    s.offset = offset.empty() ? nullptr : KeepFloats(std::move(offset));
    if (!bias.empty()) {
      c_->ints_.push_back(std::move(bias));
      s.bias = c_->ints_.back().data();
    }
    return Emit(gguf_name, s, {first.cols(), first.rows(), static_cast<int64_t>(parts.size())});
  }

  // MLA's kv_b_proj [n_head * (nope + v), kv_lora] split into k_b {nope, kv_lora, n_head}
  // (each head's K rows transposed) and v_b {kv_lora, v, n_head}. Float tensors keep
  // their type (elements moved, not converted); others are dequantized to F32.
  Status SplitKvB(const std::string& prefix, const Src& in) {
    const int64_t lora = kv_lora_;
    if (in.shape.size() != 2 || in.rows() != n_head_ * (nope_ + v_head_) || in.cols() != lora) {
      return InvalidArgumentError("tensor '" + in.name + "' must have shape [" + std::to_string(n_head_ * (nope_ + v_head_)) +
                                  ", " + std::to_string(lora) + "]");
    }
    const Src t = in.is_float() ? in : AsF32(in, 0.0f);
    const int64_t es = static_cast<int64_t>(t.bytes) / (t.rows() * lora);
    std::vector<uint8_t> k(static_cast<size_t>(n_head_ * lora * nope_ * es));
    std::vector<uint8_t> v(static_cast<size_t>(n_head_ * v_head_ * lora * es));
    for (int64_t h = 0; h < n_head_; ++h) {
      const uint8_t* head = t.data + h * (nope_ + v_head_) * lora * es;
      for (int64_t i = 0; i < nope_; ++i) {
        for (int64_t j = 0; j < lora; ++j) {
          std::memcpy(k.data() + ((h * lora + j) * nope_ + i) * es, head + (i * lora + j) * es, es);
        }
      }
      std::memcpy(v.data() + h * v_head_ * lora * es, head + nope_ * lora * es, v_head_ * lora * es);
    }
    ++split_;
    TANDEM_RETURN_IF_ERROR(Emit(prefix + "attn_k_b.weight", Owned(t, {n_head_ * lora, nope_}, std::move(k)),
                                {nope_, lora, n_head_}));
    return Emit(prefix + "attn_v_b.weight", Owned(t, {n_head_ * v_head_, lora}, std::move(v)), {lora, v_head_, n_head_});
  }

  // The GGUF name of a per-layer HF tensor suffix (after "model.layers.N."), "" if none.
  std::string LayerName(const std::string& s, bool nextn) const {
    static const std::map<std::string, std::string> kCommon = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
        {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
        {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
        {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
        {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
        {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
        {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
        {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
        {"self_attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
        {"self_attn.indexer.wk.weight", "indexer.attn_k.weight"},
        {"self_attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
        {"self_attn.indexer.k_norm.bias", "indexer.k_norm.bias"},
        {"self_attn.indexer.weights_proj.weight", "indexer.proj.weight"},
    };
    if (s == "post_attention_layernorm.weight") {
      return arch_ == "gemma3" || arch_ == "glm4moe" ? "post_attention_norm.weight" : "ffn_norm.weight";
    }
    if (arch_ == "gemma3") {
      if (s == "pre_feedforward_layernorm.weight") return "ffn_norm.weight";
      if (s == "post_feedforward_layernorm.weight") return "post_ffw_norm.weight";
    }
    if (nextn) {
      static const std::map<std::string, std::string> kNextn = {
          {"eh_proj.weight", "nextn.eh_proj.weight"},
          {"enorm.weight", "nextn.enorm.weight"},
          {"hnorm.weight", "nextn.hnorm.weight"},
          {"shared_head.norm.weight", "nextn.shared_head_norm.weight"},
          {"shared_head.head.weight", "nextn.shared_head_head.weight"},
          {"embed_tokens.weight", "nextn.embed_tokens.weight"},
      };
      if (auto it = kNextn.find(s); it != kNextn.end()) return it->second;
    }
    auto it = kCommon.find(s);
    return it == kCommon.end() ? "" : it->second;
  }

  Status AddTensors() {
    const float norm_shift = arch_ == "gemma3" ? 1.0f : 0.0f;
    // Global tensors.
    const SafetensorsTensor* embd = Take("model.embed_tokens.weight");
    if (embd == nullptr) return NotFoundError(dir_.string() + ": the checkpoint lacks model.embed_tokens.weight");
    TANDEM_ASSIGN_OR_RETURN(Src e, Resolve(*embd));
    // Gemma's embedding has rows past the tokenizer's tokens; the converter drops them.
    if (arch_ == "gemma3" && !c_->tokenizer_json_.empty()) {
      TANDEM_ASSIGN_OR_RETURN(Json tok, ReadJson(c_->tokenizer_json_));
      if (tok.is_object() && tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
          tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
        const int64_t n = static_cast<int64_t>(tok["model"]["vocab"].size() + tok["added_tokens"].size());
        if (n < e.rows()) {
          e.bytes = static_cast<uint64_t>(n * e.row_bytes());
          e.shape[0] = n;
          c_->vocab_size_ = n;
        }
      }
    }
    TANDEM_RETURN_IF_ERROR(Emit("token_embd.weight", e));
    if (const SafetensorsTensor* t = Take("model.norm.weight")) {
      TANDEM_ASSIGN_OR_RETURN(Src n, Resolve(*t));
      TANDEM_RETURN_IF_ERROR(Emit("output_norm.weight", norm_shift != 0 ? AsF32(n, norm_shift) : n));
    }
    if (const SafetensorsTensor* t = Take("lm_head.weight"); t != nullptr && !tied_) {
      TANDEM_ASSIGN_OR_RETURN(Src h, Resolve(*t));
      TANDEM_RETURN_IF_ERROR(Emit("output.weight", h));
    }
    // Per-layer tensors, experts gathered per layer and projection. The names are
    // collected first: Resolve takes companion tensors (scales) from hf_ as it goes.
    std::map<std::pair<int64_t, std::string>, std::map<int64_t, const SafetensorsTensor*>> experts;
    std::vector<std::pair<std::string, const SafetensorsTensor*>> layer_tensors(hf_.begin(), hf_.end());
    const int64_t n_blocks = n_layers_ + n_nextn_;
    for (const auto& [name, t] : layer_tensors) {
      if (!name.starts_with("model.layers.")) continue;
      size_t dot = name.find('.', 13);
      if (dot == std::string::npos) continue;
      int64_t il = -1;
      if (!ParseIndex(name.substr(13, dot - 13), &il) || il >= n_blocks) continue;
      const std::string suffix = name.substr(dot + 1);
      const std::string prefix = "blk." + std::to_string(il) + ".";
      const bool nextn = il >= n_layers_;
      if (suffix.starts_with("mlp.experts.")) {
        size_t d2 = suffix.find('.', 12);
        int64_t e = -1;
        if (d2 == std::string::npos || !ParseIndex(suffix.substr(12, d2 - 12), &e)) continue;
        const std::string proj = suffix.substr(d2 + 1);
        if (proj != "gate_proj.weight" && proj != "up_proj.weight" && proj != "down_proj.weight") continue;
        if (e >= n_expert_) {
          return InvalidArgumentError("tensor '" + name + "' names expert " + std::to_string(e) + " of " +
                                      std::to_string(n_expert_));
        }
        experts[{il, proj}][e] = t;
        used_.insert(name);
        continue;
      }
      const bool kv_b = mla_ && suffix == "self_attn.kv_b_proj.weight";
      const std::string gguf = kv_b ? "attn_kv_b.weight" : LayerName(suffix, nextn);
      if (gguf.empty()) continue;
      used_.insert(name);
      TANDEM_ASSIGN_OR_RETURN(Src s, Resolve(*t));
      const std::string full = prefix + gguf;
      if (kv_b) {
        TANDEM_RETURN_IF_ERROR(SplitKvB(prefix, s));
      } else if (arch_ == "llama" && (suffix.starts_with("self_attn.q_proj.") || suffix.starts_with("self_attn.k_proj."))) {
        TANDEM_ASSIGN_OR_RETURN(Src p, Permuted(s, suffix.starts_with("self_attn.q_proj.") ? n_head_ : n_head_kv_));
        TANDEM_RETURN_IF_ERROR(Emit(full, p));
      } else if (gguf == "ffn_gate_inp.weight" || gguf == "indexer.proj.weight") {
        ++widened_;
        TANDEM_RETURN_IF_ERROR(Emit(full, AsF32(s, 0.0f)));  // the converter writes these as F32
      } else if (norm_shift != 0 && gguf.ends_with("norm.weight")) {
        ++shifted_;
        TANDEM_RETURN_IF_ERROR(Emit(full, AsF32(s, norm_shift)));
      } else {
        TANDEM_RETURN_IF_ERROR(Emit(full, s));
      }
    }
    for (const auto& [key, by_expert] : experts) {
      const auto& [il, proj] = key;
      std::vector<Src> parts;
      for (int64_t e = 0; e < n_expert_; ++e) {
        auto it = by_expert.find(e);
        if (it == by_expert.end()) {
          return NotFoundError(dir_.string() + ": the checkpoint lacks model.layers." + std::to_string(il) +
                               ".mlp.experts." + std::to_string(e) + "." + proj);
        }
        TANDEM_ASSIGN_OR_RETURN(Src s, Resolve(*it->second));
        parts.push_back(std::move(s));
      }
      const std::string gguf = "blk." + std::to_string(il) + ".ffn_" + proj.substr(0, proj.find('_')) + "_exps.weight";
      TANDEM_RETURN_IF_ERROR(Stacked(gguf, parts));
    }
    for (const auto& [name, t] : hf_) {
      if (!used_.count(name)) c_->unused_.push_back(name);
    }
    auto say = [&](int n, const std::string& what) {
      if (n > 0) c_->conversions_.push_back(std::to_string(n) + " " + what);
    };
    say(permuted_, "q/k tensors with rows permuted (HF rotates half-and-half, llama's GGUF RoPE adjacent pairs)");
    say(shifted_, "Gemma norms stored as 1 + w in F32 (Gemma's RMSNorm multiplies by 1 + w)");
    if (stacked_ > 0) {
      say(stacked_, "per-expert groups stacked into 3-D tensors (" + std::to_string(stacked_bytes_ / 1000000) +
                        " MB copied: the kernels read an expert stack as one tensor)");
    }
    say(split_, "kv_b_proj tensors split into k_b / v_b for absorbed MLA");
    say(widened_, "router / indexer weights widened to F32 (as the converter writes them)");
    say(int8_dynamic_, "int8 matrices used in place with per-channel scales (W8A8, tokens quantized per row)");
    say(int8_static_, "int8 matrices used in place with static activation scales (msmodelslim W8A8)");
    say(fp8_, "FP8 block-scaled matrices dequantized to Q8_0 (F32 where a row is not whole 32-value blocks)");
    return Status::Ok();
  }

  static bool ParseIndex(const std::string& s, int64_t* out) {
    if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return false;
    }
    *out = std::stoll(s);
    return true;
  }

  HfCheckpoint* c_;
  fs::path dir_;
  Json config_;
  std::string arch_;
  bool mla_ = false;
  bool tied_ = false;
  int64_t n_layers_ = 0, n_nextn_ = 0, n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0;
  int64_t n_expert_ = 0, kv_lora_ = 0, nope_ = 0, v_head_ = 0;
  std::map<std::string, const SafetensorsTensor*> hf_;
  std::set<std::string> used_;
  enum class Quant { kNone, kCompressedTensors, kModelSlim, kFp8 };
  Quant quant_ = Quant::kNone;
  std::map<std::string, std::string> description_;  // msmodelslim: tensor -> scheme
  int64_t fp8_block_[2] = {128, 128};
  int permuted_ = 0, shifted_ = 0, stacked_ = 0, split_ = 0, widened_ = 0, fp8_ = 0;
  int int8_dynamic_ = 0, int8_static_ = 0;
  int64_t stacked_bytes_ = 0;
};

StatusOr<std::unique_ptr<HfCheckpoint>> HfCheckpoint::Open(const std::string& dir) {
  std::unique_ptr<HfCheckpoint> c(new HfCheckpoint());
  HfCheckpointBuilder b(c.get(), fs::path(dir));
  TANDEM_RETURN_IF_ERROR(b.Build());
  return c;
}

}  // namespace tandem
