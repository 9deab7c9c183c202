// DeepSeek-V2/V3 (deepseek2; also the GLM-4.7-Flash and Kimi files that use it): MLA
// attention — queries through a low-rank attn_q_a/attn_q_b pair (or a plain attn_q),
// keys and values from one compressed latent (attn_kv_a_mqa) plus a decoupled RoPE key,
// run absorbed through the split attn_k_b/attn_v_b — normal (adjacent-pair) RoPE with
// optional YaRN scaling and its attention-factor correction, leading dense layers, then
// MoE layers with shared experts and the gating function the file names (softmax by
// default, sigmoid with the exp_probs_b selection bias for V3-style files). glm-dsa
// (arch/glm_dsa.cc) shares all of it through LoadDeepseek2FamilyConfig.
#include <algorithm>
#include <cmath>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

StatusOr<ModelConfig> LoadDeepseek2FamilyConfig(const ModelSource& file, const std::string& arch,
                                                ExpertGating default_gating) {
  ModelConfig c;
  TANDEM_RETURN_IF_ERROR(LoadCommonHparams(file, arch, &c));
  auto get = [&](const char* suffix, uint64_t fallback, bool required, int* out) -> Status {
    const std::string key = arch + "." + suffix;
    uint64_t v = fallback;
    if (required) {
      TANDEM_ASSIGN_OR_RETURN(v, file.GetUint(key));
    } else {
      TANDEM_ASSIGN_OR_RETURN(v, file.GetUintOr(key, fallback));
    }
    if (v > (1u << 20)) return InvalidArgumentError("metadata key '" + key + "' is out of range");
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  MlaConfig& m = c.mla_dims;
  int k_mla = 0, v_mla = 0;
  TANDEM_RETURN_IF_ERROR(get("attention.q_lora_rank", 0, false, &m.q_lora_rank));
  TANDEM_RETURN_IF_ERROR(get("attention.kv_lora_rank", 0, true, &m.kv_lora_rank));
  TANDEM_RETURN_IF_ERROR(get("attention.key_length_mla", 0, false, &k_mla));
  TANDEM_RETURN_IF_ERROR(get("attention.value_length_mla", 0, false, &v_mla));
  if ((k_mla == 0 || v_mla == 0) && arch != "deepseek2") {
    return InvalidArgumentError(arch + " needs MLA: metadata keys '" + arch + ".attention.key_length_mla' and '" +
                                arch + ".attention.value_length_mla'");
  }
  if (k_mla == 0 || v_mla == 0) {
    // An older conversion: heads as plain MHA (key_length = nope + rope, value_length =
    // the value head) with the joint attn_kv_b; run absorbed all the same.
    m.joint_kv_b = true;
    k_mla = c.head_dim;
    v_mla = c.v_head_dim;
    c.n_kv_heads = 1;
    c.head_dim = m.kv_lora_rank + c.rope_dims;
    c.v_head_dim = m.kv_lora_rank;
    if (m.kv_lora_rank % 32 != 0 || (k_mla - c.rope_dims) % 32 != 0) {
      return UnimplementedError("deepseek2 with the joint attn_kv_b needs kv_lora_rank and the non-RoPE key "
                                "dims in whole 32-value blocks (it is split into Q8_0 at load)");
    }
  }
  m.qk_rope_dim = c.rope_dims;
  m.qk_nope_dim = k_mla - c.rope_dims;
  m.v_head_dim = v_mla;
  if (m.kv_lora_rank < 1 || m.qk_nope_dim < 1 || c.n_kv_heads != 1 ||
      c.head_dim != m.kv_lora_rank + m.qk_rope_dim || c.v_head_dim != m.kv_lora_rank) {
    return InvalidArgumentError(
        arch + " MLA dimensions disagree: want head_count_kv 1, key_length = kv_lora_rank + "
        "rope.dimension_count, value_length = kv_lora_rank, key_length_mla > rope.dimension_count (got "
        "head_count_kv " + std::to_string(c.n_kv_heads) + ", key_length " + std::to_string(c.head_dim) +
        ", value_length " + std::to_string(c.v_head_dim) + ", kv_lora_rank " + std::to_string(m.kv_lora_rank) +
        ", rope " + std::to_string(c.rope_dims) + ", key_length_mla " + std::to_string(k_mla) + ")");
  }
  c.mla = true;
  c.v_head_dim = 0;  // no V rows in the cache: V is the K row's latent part
  c.ffn_act = FfnActivation::kSilu;
  c.rope_neox = false;
  c.tied_output = file.FindTensor("output.weight") == nullptr;
  // llama.cpp pre-scales the scores by mscale^2 (YaRN's magnitude correction, undone on
  // the RoPE'd dims by the attention factor) over sqrt of the full query/key head.
  const float attn_factor_org = c.yarn.attn_factor * (1.0f + 0.1f * std::log(1.0f / c.rope_scale));
  const float mscale = attn_factor_org * (1.0f + 0.1f * c.yarn.log_mul * std::log(1.0f / c.rope_scale));
  c.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(k_mla));
  c.moe.gating = default_gating;
  c.moe.norm_weights = false;
  c.moe.probs_bias = file.FindTensor("blk." + std::to_string(c.n_layers - 1) + ".exp_probs_b.bias") != nullptr;
  TANDEM_RETURN_IF_ERROR(LoadMoeHparams(file, &c));
  return c;
}

StatusOr<ModelConfig> LoadDeepseek2Config(const ModelSource& file) {
  // Without expert_gating_func llama.cpp assumes softmax (DeepSeek-V2/V2.5 files), except
  // for GLM-4.7-Flash files (47/48 layers, a 154880-token vocabulary): sigmoid.
  // (A missing or bad block_count is reported by the family loader.)
  TANDEM_ASSIGN_OR_RETURN(uint64_t blocks, file.GetUintOr("deepseek2.block_count", 0));
  TANDEM_ASSIGN_OR_RETURN(uint64_t nextn, file.GetUintOr("deepseek2.nextn_predict_layers", 0));
  const uint64_t n_layers = blocks - std::min(blocks, nextn);
  const GgufValue* tokens = file.Find("tokenizer.ggml.tokens");
  const bool glm47_flash = (n_layers == 47 || n_layers == 48) && tokens != nullptr &&
                           tokens->array.size() == 154880;
  return LoadDeepseek2FamilyConfig(file, "deepseek2",
                                   glm47_flash ? ExpertGating::kSigmoid : ExpertGating::kSoftmax);
}

}  // namespace tandem
