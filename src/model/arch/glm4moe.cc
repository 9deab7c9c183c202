// GLM-4.5 / 4.6 / 4.7 (glm4moe): GQA attention with optional Q/K/V biases and optional
// per-head Q/K RMS-norm, NEOX RoPE over part of each head (rope.dimension_count), the
// FFN-input norm stored as post_attention_norm; leading dense layers, then MoE layers
// with a sigmoid router whose score-correction bias (exp_probs_b) steers selection only,
// optionally grouped top-k, weights normalized and scaled by expert_weights_scale, and
// one shared expert. NextN (MTP) blocks after the trunk are bound, not run.
#include <cmath>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

StatusOr<ModelConfig> LoadGlm4MoeConfig(const ModelSource& file) {
  ModelConfig c;
  TANDEM_RETURN_IF_ERROR(LoadCommonHparams(file, "glm4moe", &c));
  if (const GgufValue* sections = file.Find("glm4moe.rope.dimension_sections")) {
    for (const GgufValue& v : sections->array) {
      if ((v.IsInteger() && (v.u64 != 0 || v.i64 != 0))) {
        return UnimplementedError("glm4moe.rope.dimension_sections (multimodal M-RoPE) is not supported");
      }
    }
  }
  c.ffn_act = FfnActivation::kSilu;
  c.rope_neox = true;
  c.qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = file.FindTensor("blk.0.attn_q_norm.weight") != nullptr;
  c.ffn_norm_name = "post_attention_norm";
  c.tied_output = file.FindTensor("output.weight") == nullptr;
  c.kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // llama.cpp's defaults for glm4moe: sigmoid gating, weights not normalized unless the
  // file says so; the selection bias is a required tensor of every MoE layer.
  c.moe.gating = ExpertGating::kSigmoid;
  c.moe.norm_weights = false;
  c.moe.probs_bias = true;
  TANDEM_RETURN_IF_ERROR(LoadMoeHparams(file, &c));
  if (c.moe.n_expert_shared < 1) {
    return InvalidArgumentError("glm4moe.expert_shared_count must be >= 1");
  }
  return c;
}

}  // namespace tandem
