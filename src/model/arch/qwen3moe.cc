// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (GQA, NEOX RoPE,
// per-head Q/K RMS-norm) with every FFN a mixture of experts: softmax router, top-k,
// the selected probabilities renormalized to sum to one, no shared expert.
#include <cmath>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

StatusOr<ModelConfig> LoadQwen3MoeConfig(const ModelSource& file) {
  ModelConfig c;
  TANDEM_RETURN_IF_ERROR(LoadCommonHparams(file, "qwen3moe", &c));
  c.ffn_act = FfnActivation::kSilu;
  c.rope_neox = true;
  c.qk_norm = true;
  c.tied_output = file.FindTensor("output.weight") == nullptr;
  c.kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // llama.cpp's qwen3moe graph always normalizes the top-k weights, with softmax gating.
  c.moe.gating = ExpertGating::kSoftmax;
  c.moe.norm_weights = true;
  TANDEM_RETURN_IF_ERROR(LoadMoeHparams(file, &c));
  c.moe.norm_weights = true;
  c.moe.gating = ExpertGating::kSoftmax;
  if (c.moe.n_expert_shared != 0) {
    return InvalidArgumentError("qwen3moe.expert_shared_count must be 0 (qwen3moe has no shared expert)");
  }
  return c;
}

}  // namespace tandem
