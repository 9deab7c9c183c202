// config.json translated to the GGUF keys the architecture loaders read, as
// convert_hf_to_gguf.py's set_gguf_parameters writes them, and the chat template
// (part of HfCheckpointBuilder: hf_checkpoint_builder.h).
#include <cmath>
#include <cstring>

#include "model/hf_checkpoint_builder.h"

namespace tandem {

using hf_internal::ReadFile;
using hf_internal::ReadJson;
using hf_internal::StrOf;
using Json = hf_internal::Json;
namespace fs = std::filesystem;

Status HfCheckpointBuilder::AddConfigMetadata() {
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

Status HfCheckpointBuilder::AddRopeMetadata() {
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

Status HfCheckpointBuilder::Llama3RopeFactors(const Json& sc, const std::string& where, double theta) {
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

Status HfCheckpointBuilder::AddGemma3Metadata() {
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

Status HfCheckpointBuilder::AddMoeMetadata() {
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

Status HfCheckpointBuilder::AddMlaMetadata() {
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

Status HfCheckpointBuilder::AddTemplateMetadata() {
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
}  // namespace tandem
