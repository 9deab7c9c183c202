// Gemma 3: GeGLU FFN, QK-norm, norms after attention and FFN, embeddings scaled by
// sqrt(n_embd), a tied LM head, and sliding-window layers (5 of every 6) with their own
// RoPE base. Hyper-parameter defaults follow the reference implementation (llama.cpp).
#include <cmath>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

StatusOr<ModelConfig> LoadGemma3Config(const ModelSource& file) {
  ModelConfig c;
  TANDEM_RETURN_IF_ERROR(LoadCommonHparams(file, "gemma3", &c));
  c.rope_neox = true;
  c.ffn_act = FfnActivation::kGeluTanh;
  c.qk_norm = true;
  c.post_norms = true;
  c.tied_output = file.FindTensor("output.weight") == nullptr;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.q_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.rope_base_swa = 10000.0f;
  TANDEM_ASSIGN_OR_RETURN(uint64_t window, file.GetUintOr("gemma3.attention.sliding_window", 0));
  c.sliding_window = static_cast<int>(window);
  // Every `pattern`-th layer is global; the others use the sliding window.
  TANDEM_ASSIGN_OR_RETURN(uint64_t pattern, file.GetUintOr("gemma3.attention.sliding_window_pattern", 6));
  if (pattern == 0) return InvalidArgumentError("gemma3.attention.sliding_window_pattern must be > 0");
  for (int il = 0; il < c.n_layers; ++il) {
    c.layer_is_swa[il] = c.sliding_window > 0 && (il % pattern) < pattern - 1;
  }
  TANDEM_ASSIGN_OR_RETURN(double softcap, file.GetFloatOr("gemma3.final_logit_softcapping", 0.0));
  c.final_logit_softcap = static_cast<float>(softcap);
  return c;
}

}  // namespace tandem
