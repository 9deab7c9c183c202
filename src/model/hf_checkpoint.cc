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

#include "kernels/half.h"

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

  Status CheckQuantization() {
    std::error_code ec;
    if (fs::is_regular_file(dir_ / "quant_model_description.json", ec)) {
      return UnimplementedError((dir_ / "quant_model_description.json").string() +
                                ": msmodelslim checkpoints are not supported yet");
    }
    const Json* q = Key("quantization_config");
    if (q == nullptr) return Status::Ok();
    std::string method = q->is_object() && q->contains("quant_method") && (*q)["quant_method"].is_string()
                             ? (*q)["quant_method"].get<std::string>()
                             : "?";
    return UnimplementedError(Where() + "quantization_config.quant_method '" + method +
                              "' is not supported yet");
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
      return UnimplementedError(Where() + where + "rope_type 'llama3' (RoPE frequency factors) is not supported yet");
    }
    return UnimplementedError(Where() + where + "rope_type '" + type + "' is not supported (linear, yarn)");
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
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) {
          return PutString("tokenizer.chat_template", e["template"].get<std::string>());
        }
      }
    }
    return InvalidArgumentError(c_->tokenizer_config_ +
                                ": chat_template must be a string or a list holding a {\"name\": \"default\"} entry");
  }

  // ---- tensors ----------------------------------------------------------------------
  const SafetensorsTensor* Take(const std::string& hf_name) {
    auto it = hf_.find(hf_name);
    if (it == hf_.end()) return nullptr;
    used_.insert(hf_name);
    return it->second;
  }

  // A tensor used in place: dims reversed (GGUF's contiguous row length first).
  Status InPlace(const std::string& gguf_name, const SafetensorsTensor& t, int64_t rows_limit = -1) {
    if (!IsFloatDtype(t.dtype)) {
      return UnimplementedError("tensor '" + t.name + "' has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                                " which Tandem cannot compute with here (F32, F16, BF16 in a float checkpoint)");
    }
    GgufTensorInfo g;
    g.name = gguf_name;
    g.type = FloatType(t.dtype);
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) g.dims.push_back(*it);
    if (g.dims.empty()) g.dims.push_back(1);
    g.num_elements = t.num_elements;
    if (rows_limit >= 0 && g.dims.size() == 2 && rows_limit < g.dims[1]) {
      g.dims[1] = rows_limit;
      g.num_elements = rows_limit * g.dims[0];
    }
    g.data = t.data;
    g.size_bytes = static_cast<uint64_t>(g.num_elements) * SafetensorsDtypeSize(t.dtype);
    g.offset = t.begin;  // within its shard (the fingerprint hashes names and offsets)
    return c_->AddTensor(std::move(g));
  }

  // A tensor built at open into a buffer the checkpoint keeps.
  Status Owned(const std::string& gguf_name, TensorType type, std::vector<int64_t> dims,
               std::vector<uint8_t> bytes) {
    GgufTensorInfo g;
    g.name = gguf_name;
    g.type = type;
    g.num_elements = 1;
    for (int64_t d : dims) g.num_elements *= d;
    g.dims = std::move(dims);
    g.size_bytes = bytes.size();
    c_->buffers_.push_back(std::move(bytes));
    g.data = c_->buffers_.back().data();
    g.offset = (uint64_t{1} << 62) + c_->buffers_.size();  // not in a file: unique, never a file offset
    return c_->AddTensor(std::move(g));
  }

  // A float tensor as F32 values, optionally plus a shift (Gemma's norm + 1).
  Status AsF32(const std::string& gguf_name, const SafetensorsTensor& t, float shift) {
    if (!IsFloatDtype(t.dtype)) return InPlace(gguf_name, t);  // names the dtype
    std::vector<uint8_t> bytes(static_cast<size_t>(t.num_elements) * 4);
    for (int64_t i = 0; i < t.num_elements; ++i) {
      const float v = FloatAt(t, i) + shift;
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
    std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
    if (dims.empty()) dims.push_back(1);
    return Owned(gguf_name, TensorType::kF32, std::move(dims), std::move(bytes));
  }

  Status Want2d(const SafetensorsTensor& t, int64_t rows, int64_t cols) {
    if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
      std::string got;
      for (int64_t d : t.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      return InvalidArgumentError("tensor '" + t.name + "' has shape [" + got + "], expected [" +
                                  std::to_string(rows) + ", " + std::to_string(cols) + "]");
    }
    return Status::Ok();
  }

  // llama's q/k rows (or bias) permuted from HF's rotate-half order to GGUF's adjacent
  // pairs: reshape(n_head, 2, rows / n_head / 2, ...).swapaxes(1, 2).
  Status Permuted(const std::string& gguf_name, const SafetensorsTensor& t, int64_t n_head) {
    if (!IsFloatDtype(t.dtype)) return InPlace(gguf_name, t);
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (rows % (2 * n_head) != 0) {
      return InvalidArgumentError("tensor '" + t.name + "' has " + std::to_string(rows) +
                                  " rows, not a multiple of 2 x " + std::to_string(n_head) + " heads");
    }
    const int64_t row_bytes = static_cast<int64_t>(t.size_bytes()) / rows;
    const int64_t per_head = rows / n_head, half = per_head / 2;
    std::vector<uint8_t> bytes(t.size_bytes());
    for (int64_t h = 0; h < n_head; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t out = h * per_head + i * 2 + j, in = h * per_head + j * half + i;
          std::memcpy(bytes.data() + out * row_bytes, t.data + in * row_bytes, row_bytes);
        }
      }
    }
    std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
    ++permuted_;
    return Owned(gguf_name, FloatType(t.dtype), std::move(dims), std::move(bytes));
  }

  // Per-expert matrices [rows, cols] stacked into one GGUF tensor {cols, rows, n}.
  Status Stacked(const std::string& gguf_name, const std::vector<const SafetensorsTensor*>& parts) {
    const SafetensorsTensor& first = *parts[0];
    if (!IsFloatDtype(first.dtype)) return InPlace(gguf_name, first);
    if (first.shape.size() != 2) return InvalidArgumentError("tensor '" + first.name + "' is not a matrix");
    std::vector<uint8_t> bytes;
    bytes.reserve(first.size_bytes() * parts.size());
    for (const SafetensorsTensor* p : parts) {
      if (p->dtype != first.dtype || p->shape != first.shape) {
        return InvalidArgumentError("expert tensor '" + p->name + "' differs in dtype or shape from '" +
                                    first.name + "'");
      }
      bytes.insert(bytes.end(), p->data, p->data + p->size_bytes());
    }
    ++stacked_;
    stacked_bytes_ += static_cast<int64_t>(bytes.size());
    return Owned(gguf_name, FloatType(first.dtype),
                 {first.shape[1], first.shape[0], static_cast<int64_t>(parts.size())}, std::move(bytes));
  }

  // MLA's kv_b_proj [n_head * (nope + v), kv_lora] split into k_b {nope, kv_lora, n_head}
  // (each head's K rows transposed) and v_b {kv_lora, v, n_head}.
  Status SplitKvB(const std::string& prefix, const SafetensorsTensor& t) {
    if (!IsFloatDtype(t.dtype)) return InPlace(prefix + "attn_kv_b.weight", t);
    TANDEM_RETURN_IF_ERROR(Want2d(t, n_head_ * (nope_ + v_head_), kv_lora_));
    const int64_t es = SafetensorsDtypeSize(t.dtype), lora = kv_lora_;
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
    TANDEM_RETURN_IF_ERROR(Owned(prefix + "attn_k_b.weight", FloatType(t.dtype), {nope_, lora, n_head_}, std::move(k)));
    return Owned(prefix + "attn_v_b.weight", FloatType(t.dtype), {lora, v_head_, n_head_}, std::move(v));
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
    auto norm = [&](const std::string& gguf, const SafetensorsTensor& t) {
      if (norm_shift != 0) ++shifted_;
      return norm_shift != 0 ? AsF32(gguf, t, norm_shift) : InPlace(gguf, t);
    };
    // Global tensors.
    const SafetensorsTensor* embd = Take("model.embed_tokens.weight");
    if (embd == nullptr) return NotFoundError(dir_.string() + ": the checkpoint lacks model.embed_tokens.weight");
    // Gemma's embedding has rows past the tokenizer's tokens; the converter drops them.
    int64_t embd_rows = -1;
    if (arch_ == "gemma3" && !c_->tokenizer_json_.empty()) {
      TANDEM_ASSIGN_OR_RETURN(Json tok, ReadJson(c_->tokenizer_json_));
      if (tok.is_object() && tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
          tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
        embd_rows = static_cast<int64_t>(tok["model"]["vocab"].size() + tok["added_tokens"].size());
        if (embd_rows < c_->vocab_size_) c_->vocab_size_ = embd_rows;
      }
    }
    TANDEM_RETURN_IF_ERROR(InPlace("token_embd.weight", *embd, embd_rows));
    if (const SafetensorsTensor* t = Take("model.norm.weight")) TANDEM_RETURN_IF_ERROR(norm("output_norm.weight", *t));
    if (const SafetensorsTensor* t = Take("lm_head.weight"); t != nullptr && !tied_) {
      TANDEM_RETURN_IF_ERROR(InPlace("output.weight", *t));
    }
    // Per-layer tensors, experts gathered per layer and projection.
    std::map<std::pair<int64_t, std::string>, std::map<int64_t, const SafetensorsTensor*>> experts;
    const int64_t n_blocks = n_layers_ + n_nextn_;
    for (const auto& [name, t] : hf_) {
      if (!name.starts_with("model.layers.")) continue;
      size_t dot = name.find('.', 13);
      if (dot == std::string::npos) continue;
      int64_t il = -1;
      try {
        il = std::stoll(name.substr(13, dot - 13));
      } catch (...) {
        continue;
      }
      if (il < 0 || il >= n_blocks) continue;
      const std::string suffix = name.substr(dot + 1);
      const std::string prefix = "blk." + std::to_string(il) + ".";
      const bool nextn = il >= n_layers_;
      if (suffix.starts_with("mlp.experts.")) {
        size_t d2 = suffix.find('.', 12);
        if (d2 == std::string::npos) continue;
        int64_t e = -1;
        try {
          e = std::stoll(suffix.substr(12, d2 - 12));
        } catch (...) {
          continue;
        }
        const std::string proj = suffix.substr(d2 + 1);
        if (proj != "gate_proj.weight" && proj != "up_proj.weight" && proj != "down_proj.weight") continue;
        if (e < 0 || e >= n_expert_) {
          return InvalidArgumentError("tensor '" + name + "' names expert " + std::to_string(e) + " of " +
                                      std::to_string(n_expert_));
        }
        experts[{il, proj}][e] = t;
        used_.insert(name);
        continue;
      }
      if (suffix == "self_attn.kv_b_proj.weight" && mla_) {
        used_.insert(name);
        TANDEM_RETURN_IF_ERROR(SplitKvB(prefix, *t));
        continue;
      }
      const std::string gguf = LayerName(suffix, nextn);
      if (gguf.empty()) continue;
      used_.insert(name);
      const std::string full = prefix + gguf;
      if (arch_ == "llama" && (suffix.starts_with("self_attn.q_proj.") || suffix.starts_with("self_attn.k_proj."))) {
        TANDEM_RETURN_IF_ERROR(Permuted(full, *t, suffix.starts_with("self_attn.q_proj.") ? n_head_ : n_head_kv_));
      } else if (gguf == "ffn_gate_inp.weight" || gguf == "indexer.proj.weight") {
        ++widened_;
        TANDEM_RETURN_IF_ERROR(AsF32(full, *t, 0.0f));  // the converter writes these as F32
      } else if (gguf.ends_with("norm.weight") && gguf != "indexer.k_norm.weight") {
        TANDEM_RETURN_IF_ERROR(norm(full, *t));
      } else {
        TANDEM_RETURN_IF_ERROR(InPlace(full, *t));
      }
    }
    for (const auto& [key, by_expert] : experts) {
      const auto& [il, proj] = key;
      std::vector<const SafetensorsTensor*> parts;
      for (int64_t e = 0; e < n_expert_; ++e) {
        auto it = by_expert.find(e);
        if (it == by_expert.end()) {
          return NotFoundError(dir_.string() + ": the checkpoint lacks model.layers." + std::to_string(il) +
                               ".mlp.experts." + std::to_string(e) + "." + proj);
        }
        parts.push_back(it->second);
      }
      const std::string gguf = "blk." + std::to_string(il) + ".ffn_" + proj.substr(0, proj.find('_')) + "_exps.weight";
      TANDEM_RETURN_IF_ERROR(Stacked(gguf, parts));
    }
    for (const auto& [name, t] : hf_) {
      if (!used_.count(name)) c_->unused_.push_back(name);
    }
    if (permuted_ > 0) {
      c_->conversions_.push_back("q/k rows of " + std::to_string(permuted_) +
                                 " tensors permuted (HF rotates half-and-half, llama's GGUF RoPE adjacent pairs)");
    }
    if (shifted_ > 0) c_->conversions_.push_back(std::to_string(shifted_) + " Gemma norms stored as 1 + w in F32");
    if (stacked_ > 0) {
      c_->conversions_.push_back(std::to_string(stacked_) + " per-expert groups stacked into 3-D tensors (" +
                                 std::to_string(stacked_bytes_ / 1000000) + " MB copied)");
    }
    if (split_ > 0) c_->conversions_.push_back(std::to_string(split_) + " kv_b_proj split into k_b / v_b for absorbed MLA");
    if (widened_ > 0) c_->conversions_.push_back(std::to_string(widened_) + " router / indexer weights widened to F32");
    return Status::Ok();
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
  int permuted_ = 0, shifted_ = 0, stacked_ = 0, split_ = 0, widened_ = 0;
  int64_t stacked_bytes_ = 0;
};

StatusOr<std::unique_ptr<HfCheckpoint>> HfCheckpoint::Open(const std::string& dir) {
  std::unique_ptr<HfCheckpoint> c(new HfCheckpoint());
  HfCheckpointBuilder b(c.get(), fs::path(dir));
  TANDEM_RETURN_IF_ERROR(b.Build());
  return c;
}

}  // namespace tandem
