// The llama family: LLaMA (normal RoPE, SwiGLU, optional untied LM head), Qwen2
// (NEOX RoPE, Q/K/V biases) and Qwen3 (NEOX RoPE, per-head Q/K RMS-norm); Llama 3.1's
// RoPE frequency factors (rope_freqs.weight) where the file has them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

StatusOr<ModelConfig> LoadLlamaFamilyConfig(const ModelSource& file, const std::string& arch) {
  ModelConfig c;
  TANDEM_RETURN_IF_ERROR(LoadCommonHparams(file, arch, &c));
  c.ffn_act = FfnActivation::kSilu;
  c.rope_neox = arch != "llama";
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3";
  c.tied_output = file.FindTensor("output.weight") == nullptr;
  c.kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (const GgufTensorInfo* f = file.FindTensor("rope_freqs.weight")) {
    if (f->type != TensorType::kF32 || f->num_elements != c.rope_dims / 2) {
      return InvalidArgumentError("rope_freqs.weight must be F32 with rope.dimension_count / 2 = " +
                                  std::to_string(c.rope_dims / 2) + " values");
    }
    c.rope_freq_factors.resize(static_cast<size_t>(f->num_elements));
    std::memcpy(c.rope_freq_factors.data(), f->data, c.rope_freq_factors.size() * sizeof(float));
    if (std::any_of(c.rope_freq_factors.begin(), c.rope_freq_factors.end(),
                    [](float v) { return !(v > 0) || !std::isfinite(v); })) {
      return InvalidArgumentError("rope_freqs.weight holds a factor that is not a positive number");
    }
  }
  return c;
}

}  // namespace tandem
