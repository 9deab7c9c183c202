// ModelConfig: the hyper-parameters of a decoder-only transformer, read from GGUF
// metadata by the architecture's loader (model/arch/*.cc).
//
// One generic forward pass (model/forward.cc) is driven by these fields; the flags
// name the architectural variations of the supported families.
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem {

class GgufFile;

enum class FfnActivation { kSilu, kGeluTanh };

struct ModelConfig {
  std::string arch;          // general.architecture: "gemma3", "llama", "qwen2", "qwen3"
  int n_layers = 0;
  int n_embd = 0;            // residual width
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;          // per-head Q/K width
  int v_head_dim = 0;        // per-head V width
  int n_ff = 0;              // feed-forward hidden width
  int n_vocab = 0;
  int context_length = 0;    // trained context (tokens)
  float rms_eps = 1e-6f;

  // Rotary embedding.
  int rope_dims = 0;         // dims rotated per head (<= head_dim)
  bool rope_neox = false;    // pairs (i, i+d/2) instead of (2i, 2i+1)
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;   // position multiplier (1 / linear scaling factor)
  float rope_base_swa = 10000.0f;  // for sliding-window layers

  // Sliding-window attention: a token at position p sees positions > p - window.
  int sliding_window = 0;           // tokens; 0 = none
  std::vector<bool> layer_is_swa;   // [n_layers]

  float q_scale = 1.0f;       // multiplier on Q before attention (Gemma)
  float kq_scale = 1.0f;      // multiplier on the Q·K scores (LLaMA family)
  float embd_scale = 1.0f;    // multiplier on token embeddings (Gemma: sqrt(n_embd))
  float final_logit_softcap = 0.0f;  // 0 = none
  FfnActivation ffn_act = FfnActivation::kSilu;
  bool qk_norm = false;       // RMS-norm Q and K per head (gemma3, qwen3)
  bool qkv_bias = false;      // biases on Q, K, V (qwen2)
  bool post_norms = false;    // norms after attention and after FFN (gemma2/3)
  bool tied_output = false;   // LM head = token embedding

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int v_dim() const { return n_kv_heads * v_head_dim; }
};

// Architectures Tandem can run, for error messages.
inline constexpr const char* kSupportedArchitectures = "gemma3, llama, qwen2, qwen3";

// Reads the config of any supported architecture (dispatches on general.architecture).
// Unimplemented naming the supported list for others.
StatusOr<ModelConfig> LoadModelConfig(const GgufFile& file);

// Per-architecture loaders (model/arch/*.cc).
StatusOr<ModelConfig> LoadGemma3Config(const GgufFile& file);
StatusOr<ModelConfig> LoadLlamaFamilyConfig(const GgufFile& file, const std::string& arch);

// Reads the keys every architecture shares ({arch}.block_count, ...).
Status LoadCommonHparams(const GgufFile& file, const std::string& arch, ModelConfig* config);

}  // namespace tandem
