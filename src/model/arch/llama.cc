// The llama family: LLaMA (normal RoPE, SwiGLU, optional untied LM head), Qwen2
// (NEOX RoPE, Q/K/V biases) and Qwen3 (NEOX RoPE, per-head Q/K RMS-norm).
#include <cmath>

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
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    return UnimplementedError("rope_freqs.weight (llama3.1 RoPE frequency factors) is not supported yet");
  }
  return c;
}

}  // namespace tandem
