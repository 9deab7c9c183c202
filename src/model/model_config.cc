#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include "model/model_source.h"

namespace tandem {

namespace {

// YaRN's constants as llama.cpp derives them (llama-context.cpp, ggml_rope_yarn_corr_dims).
Status LoadYarn(const ModelSource& file, const std::string& arch, ModelConfig* c) {
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  RopeYarn& y = c->yarn;
  TANDEM_ASSIGN_OR_RETURN(uint64_t n_ctx_orig,
                          file.GetUintOr(key("rope.scaling.original_context_length"), c->context_length));
  TANDEM_ASSIGN_OR_RETURN(double beta_fast, file.GetFloatOr(key("rope.scaling.yarn_beta_fast"), 32.0));
  TANDEM_ASSIGN_OR_RETURN(double beta_slow, file.GetFloatOr(key("rope.scaling.yarn_beta_slow"), 1.0));
  TANDEM_ASSIGN_OR_RETURN(double ext, file.GetFloatOr(key("rope.scaling.yarn_ext_factor"), 1.0));
  TANDEM_ASSIGN_OR_RETURN(double log_mul, file.GetFloatOr(key("rope.scaling.yarn_log_multiplier"), 0.0));
  TANDEM_ASSIGN_OR_RETURN(double rope_attn, file.GetFloatOr(key("rope.scaling.attn_factor"), 1.0));
  if (n_ctx_orig == 0 || beta_fast <= 0 || beta_slow <= 0) {
    return InvalidArgumentError(key("rope.scaling") + ": original_context_length and the YaRN betas must be positive");
  }
  // deepseek2 and deepseek32 files store 0.1 * mscale_all_dim; llama.cpp cancels the
  // 0.1. Its glm-dsa loader does not read the key at all.
  if (arch == "deepseek2" || arch == "deepseek32") log_mul /= 0.1;
  if (arch == "glm-dsa") log_mul = 0.0;
  y.log_mul = static_cast<float>(log_mul);
  y.ext_factor = static_cast<float>(ext);
  const float factor = 1.0f / c->rope_scale;
  auto get_mscale = [](float scale, float mscale) {
    return scale <= 1.0f ? 1.0f : (0.1f * mscale * std::log(scale) + 1.0f);
  };
  float attn = 1.0f;
  if (y.ext_factor != 0) {
    if (y.log_mul != 0.0f) {
      const float mscale = arch == "deepseek2" && y.log_mul != 1.0f ? y.log_mul : 1.0f;
      attn = get_mscale(factor, mscale) / get_mscale(factor, y.log_mul);
    } else {
      attn = get_mscale(factor, 1.0f);
    }
    // ggml's rope multiplies by (1 + 0.1 ln factor) again; llama.cpp cancels it here.
    attn *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  y.attn_factor = attn * static_cast<float>(rope_attn);
  auto corr_dim = [&](double n_rot) {
    return c->rope_dims * std::log(static_cast<float>(n_ctx_orig) / (static_cast<float>(n_rot) * 2 * static_cast<float>(M_PI))) /
           (2 * std::log(c->rope_base));
  };
  y.corr_low = std::max(0.0f, std::floor(static_cast<float>(corr_dim(beta_fast))));
  y.corr_high = std::min(static_cast<float>(c->rope_dims - 1), std::ceil(static_cast<float>(corr_dim(beta_slow))));
  return Status::Ok();
}

}  // namespace

Status LoadCommonHparams(const ModelSource& file, const std::string& arch, ModelConfig* c) {
  c->arch = arch;
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  auto get_int = [&](const char* suffix, int* out) -> Status {
    TANDEM_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key(suffix)));
    if (v == 0 || v > (1u << 24)) {
      return InvalidArgumentError("metadata key '" + key(suffix) + "' is out of range: " + std::to_string(v));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(get_int("block_count", &c->n_layers));
  // NextN (MTP) blocks are counted in block_count and stored after the trunk.
  TANDEM_ASSIGN_OR_RETURN(uint64_t nextn, file.GetUintOr(key("nextn_predict_layers"), 0));
  if (nextn >= static_cast<uint64_t>(c->n_layers)) {
    return InvalidArgumentError("metadata key '" + key("nextn_predict_layers") + "' (" +
                                std::to_string(nextn) + ") must be below block_count (" +
                                std::to_string(c->n_layers) + ")");
  }
  c->n_nextn_layers = static_cast<int>(nextn);
  c->n_layers -= c->n_nextn_layers;
  TANDEM_RETURN_IF_ERROR(get_int("embedding_length", &c->n_embd));
  TANDEM_RETURN_IF_ERROR(get_int("attention.head_count", &c->n_heads));
  TANDEM_RETURN_IF_ERROR(get_int("feed_forward_length", &c->n_ff));
  TANDEM_RETURN_IF_ERROR(get_int("context_length", &c->context_length));
  c->n_kv_heads = c->n_heads;
  if (file.Find(key("attention.head_count_kv"))) TANDEM_RETURN_IF_ERROR(get_int("attention.head_count_kv", &c->n_kv_heads));
  if (c->n_heads % c->n_kv_heads != 0) {
    return InvalidArgumentError("head_count " + std::to_string(c->n_heads) +
                                " is not a multiple of head_count_kv " + std::to_string(c->n_kv_heads));
  }
  c->head_dim = c->n_embd / c->n_heads;
  if (file.Find(key("attention.key_length"))) TANDEM_RETURN_IF_ERROR(get_int("attention.key_length", &c->head_dim));
  c->v_head_dim = c->head_dim;
  if (file.Find(key("attention.value_length"))) TANDEM_RETURN_IF_ERROR(get_int("attention.value_length", &c->v_head_dim));
  c->rope_dims = c->head_dim;
  if (file.Find(key("rope.dimension_count"))) TANDEM_RETURN_IF_ERROR(get_int("rope.dimension_count", &c->rope_dims));
  if (c->rope_dims > c->head_dim || c->rope_dims % 2 != 0) {
    return InvalidArgumentError("rope.dimension_count must be even and <= the head size");
  }
  TANDEM_ASSIGN_OR_RETURN(double eps, file.GetFloatOr(key("attention.layer_norm_rms_epsilon"), 1e-6));
  c->rms_eps = static_cast<float>(eps);
  TANDEM_ASSIGN_OR_RETURN(double base, file.GetFloatOr(key("rope.freq_base"), 10000.0));
  c->rope_base = static_cast<float>(base);
  TANDEM_ASSIGN_OR_RETURN(std::string scaling, file.GetStringOr(key("rope.scaling.type"), "none"));
  if (scaling == "linear" || scaling == "yarn") {
    TANDEM_ASSIGN_OR_RETURN(double factor, file.GetFloatOr(key("rope.scaling.factor"), 1.0));
    // llama.cpp reads a factor of 0 as "no scaling".
    if (factor < 0 || !std::isfinite(factor)) return InvalidArgumentError("rope.scaling.factor must be positive");
    c->rope_scale = factor == 0 ? 1.0f : static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    return UnimplementedError("rope scaling type '" + scaling + "' is not supported (none, linear, yarn)");
  }
  if (scaling == "yarn") TANDEM_RETURN_IF_ERROR(LoadYarn(file, arch, c));
  c->layer_is_swa.assign(c->n_layers, false);
  return Status::Ok();
}

Status LoadMoeHparams(const ModelSource& file, ModelConfig* c) {
  MoeConfig& m = c->moe;
  auto key = [&](const char* suffix) { return c->arch + "." + suffix; };
  auto get = [&](const char* suffix, bool required, uint64_t fallback, uint64_t max,
                 int* out) -> Status {
    uint64_t v = fallback;
    if (required) {
      TANDEM_ASSIGN_OR_RETURN(v, file.GetUint(key(suffix)));
    } else {
      TANDEM_ASSIGN_OR_RETURN(v, file.GetUintOr(key(suffix), fallback));
    }
    if (v > max) {
      return InvalidArgumentError("metadata key '" + key(suffix) + "' is out of range: " +
                                  std::to_string(v) + " (at most " + std::to_string(max) + ")");
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(get("expert_count", true, 0, 4096, &m.n_expert));
  TANDEM_RETURN_IF_ERROR(get("expert_used_count", true, 0, 4096, &m.n_expert_used));
  if (m.n_expert < 1 || m.n_expert_used < 1 || m.n_expert_used > m.n_expert) {
    return InvalidArgumentError(key("expert_used_count") + " (" + std::to_string(m.n_expert_used) +
                                ") must be in [1, " + key("expert_count") + " = " +
                                std::to_string(m.n_expert) + "]");
  }
  // Without the key llama.cpp takes n_ff / n_expert_used.
  TANDEM_RETURN_IF_ERROR(get("expert_feed_forward_length", false,
                             static_cast<uint64_t>(c->n_ff / m.n_expert_used), 1u << 24, &m.n_ff_exp));
  if (m.n_ff_exp < 1) return InvalidArgumentError(key("expert_feed_forward_length") + " must be > 0");
  TANDEM_RETURN_IF_ERROR(get("expert_shared_count", false, 0, 64, &m.n_expert_shared));
  m.n_ff_shexp = m.n_ff_exp * m.n_expert_shared;
  TANDEM_RETURN_IF_ERROR(get("leading_dense_block_count", false, 0, static_cast<uint64_t>(c->n_layers),
                             &m.n_dense_lead));
  TANDEM_RETURN_IF_ERROR(get("expert_group_count", false, 0, static_cast<uint64_t>(m.n_expert), &m.n_groups));
  TANDEM_RETURN_IF_ERROR(get("expert_group_used_count", false, 0, 4096, &m.n_group_used));
  if (m.n_groups > 1 && (m.n_expert % m.n_groups != 0 || m.n_group_used < 1 ||
                         m.n_group_used > m.n_groups ||
                         m.n_group_used * (m.n_expert / m.n_groups) < m.n_expert_used)) {
    return InvalidArgumentError(key("expert_group_count") + " " + std::to_string(m.n_groups) + " / " +
                                key("expert_group_used_count") + " " + std::to_string(m.n_group_used) +
                                " do not divide " + std::to_string(m.n_expert) + " experts with " +
                                std::to_string(m.n_expert_used) + " used");
  }
  TANDEM_ASSIGN_OR_RETURN(double scale, file.GetFloatOr(key("expert_weights_scale"), 0.0));
  // llama.cpp applies the scale only when it is neither 0 (unset) nor 1.
  m.weights_scale = scale == 0.0 ? 1.0f : static_cast<float>(scale);
  TANDEM_ASSIGN_OR_RETURN(m.norm_weights, file.GetBoolOr(key("expert_weights_norm"), m.norm_weights));
  TANDEM_ASSIGN_OR_RETURN(uint64_t gating, file.GetUintOr(key("expert_gating_func"), 0));
  if (gating == 1) {
    m.gating = ExpertGating::kSoftmax;
  } else if (gating == 2) {
    m.gating = ExpertGating::kSigmoid;
  } else if (gating != 0) {
    return UnimplementedError("metadata key '" + key("expert_gating_func") + "' = " +
                              std::to_string(gating) + " is not supported (1 softmax, 2 sigmoid)");
  }
  return Status::Ok();
}

StatusOr<ModelConfig> LoadModelConfig(const ModelSource& file) {
  TANDEM_ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  StatusOr<ModelConfig> config = [&]() -> StatusOr<ModelConfig> {
    if (arch == "gemma3") return LoadGemma3Config(file);
    if (arch == "llama" || arch == "qwen2" || arch == "qwen3") return LoadLlamaFamilyConfig(file, arch);
    if (arch == "qwen3moe") return LoadQwen3MoeConfig(file);
    if (arch == "glm4moe") return LoadGlm4MoeConfig(file);
    if (arch == "deepseek2") return LoadDeepseek2Config(file);
    if (arch == "glm-dsa") return LoadGlmDsaConfig(file);
    if (arch == "deepseek32") return LoadDeepseek32Config(file);
    return UnimplementedError("unsupported architecture '" + arch + "' (supported: " +
                              kSupportedArchitectures + ")");
  }();
  if (!config.ok()) return config.status();
  if (!config->mla && config->v_head_dim != config->head_dim) {
    return UnimplementedError("value_length != key_length is not supported");
  }
  if (const GgufValue* tokens = file.Find("tokenizer.ggml.tokens")) {
    config->n_vocab = static_cast<int>(tokens->array.size());
  }
  return config;
}

}  // namespace tandem

namespace tandem {

int64_t ModelConfig::KeyRowBytes(KvDtype dtype) const {
  if (mla || dsa.n_heads > 0 || dtype == KvDtype::kF16) return 2 * static_cast<int64_t>(kv_dim());
  return KvRowBytes(dtype, static_cast<int64_t>(n_kv_heads) * head_dim, head_dim);
}

int64_t ModelConfig::ValueRowBytes(KvDtype dtype) const {
  if (v_dim() == 0 || mla || dsa.n_heads > 0 || dtype == KvDtype::kF16)
    return 2 * static_cast<int64_t>(v_dim());
  return KvRowBytes(dtype, v_dim(), v_head_dim);
}

Status ModelConfig::CheckKvDtype(KvDtype dtype) const {
  if (dtype == KvDtype::kF16 || (!mla && dsa.n_heads == 0)) return Status::Ok();
  return InvalidArgumentError(std::string("--kv-cache-dtype ") + KvDtypeName(dtype) + ": " + arch +
                              "'s " + (mla ? "MLA" : "sparse") +
                              " attention reads an fp16 KV cache only (use auto or fp16)");
}

}  // namespace tandem
