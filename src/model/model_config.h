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
#include "kernels/kv_dtype.h"

namespace tandem {

class ModelSource;

enum class FfnActivation { kSilu, kGeluTanh };

// How router logits become expert probabilities (GGUF {arch}.expert_gating_func: 1
// softmax, 2 sigmoid, as llama.cpp numbers them).
enum class ExpertGating { kSoftmax = 1, kSigmoid = 2 };

// The mixture-of-experts feed-forward of a sparse model (n_expert == 0: a dense model).
// Layers below n_dense_lead keep a dense FFN of n_ff; the others route each token to
// n_expert_used of n_expert experts of width n_ff_exp, plus n_expert_shared always-on
// experts fused into one of width n_ff_shexp.
struct MoeConfig {
  int n_expert = 0;
  int n_expert_used = 0;     // top-k
  int n_ff_exp = 0;          // one routed expert's hidden width
  int n_expert_shared = 0;
  int n_ff_shexp = 0;        // the shared experts' hidden width (n_ff_exp * n_expert_shared)
  int n_dense_lead = 0;      // leading layers with a dense FFN (glm4moe, deepseek2)
  ExpertGating gating = ExpertGating::kSoftmax;
  bool probs_bias = false;   // exp_probs_b: added to the probabilities for selection only
  bool norm_weights = false; // selected weights divided by their sum
  float weights_scale = 1.0f;  // multiplier on the selected weights
  // Grouped selection (DeepSeek-V3): experts in n_groups groups, a group scored by the
  // sum of its two best selection scores; only the best n_group_used groups compete.
  int n_groups = 0;          // 0 or 1: no grouping
  int n_group_used = 0;
};

// Multi-head latent attention (DeepSeek-V2/V3, GLM-5): the cache holds one latent row
// per token, kv_lora_rank normed values then qk_rope_dim RoPE'd key values (the K
// row, head_dim = kv_lora_rank + qk_rope_dim, one KV head, no V rows: V is the K
// row's latent part). Queries are absorbed into the latent through attn_k_b, and each
// head's output leaves it through attn_v_b ("absorbed" MLA, as llama.cpp runs it).
struct MlaConfig {
  int q_lora_rank = 0;   // 0: a plain attn_q projection
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;   // per-head query/key dims without RoPE
  int qk_rope_dim = 0;   // per-head RoPE dims (= rope_dims)
  int v_head_dim = 0;    // per-head value width after attn_v_b
  // An older conversion stores one attn_kv_b [n_head * (nope + v_head), kv_lora_rank]
  // instead of attn_k_b / attn_v_b; Model::Load splits it (SplitMlaKvB).
  bool joint_kv_b = false;
};

// DeepSeek sparse attention (deepseek32, glm-dsa): a "lightning indexer" scores every cached
// position for each query and MLA attends only to the top_k best (all of them while
// there are no more than top_k). Per query token: an indexer query of n_heads heads
// (attn_q_b of the MLA's normed q_a output) and one indexer key (LayerNorm'd attn_k of
// the layer input), both RoPE'd on their first rope_dims and rotated by a Walsh-Hadamard
// matrix; score(j) = sum_h relu(q_h . k_j) * w_h, w = proj · x / sqrt(head_dim * n_heads).
// The key is cached: it widens each K row by head_dim fp16 values after the latent and
// RoPE parts. A "shared" layer (layer_full false, glm-dsa only) has no indexer and
// reuses the selection of the last full layer before it. The two architectures differ
// (as llama.cpp runs them) in the indexer's RoPE pairing and its LayerNorm's epsilon.
struct DsaConfig {
  int n_heads = 0;              // indexer heads; 0: no indexer (every other architecture)
  int head_dim = 0;             // a power of two in [64, 1024] (the Hadamard rotation's size)
  int top_k = 0;                // cached positions kept per query
  std::vector<bool> layer_full; // [n_layers] the layer runs its own indexer
  bool rope_neox = false;       // indexer RoPE pairs (i, i + rope/2): deepseek32; adjacent: glm-dsa
  float k_norm_eps = 0.0f;      // the indexer key's LayerNorm epsilon (deepseek32 1e-6, glm-dsa 0)
};

// YaRN RoPE scaling (ggml's rope_yarn): angles interpolated by rope_scale with a ramp
// back to extrapolation over dims [corr_low, corr_high], magnitudes times mscale.
struct RopeYarn {
  float ext_factor = 0.0f;   // 0: no YaRN
  float attn_factor = 1.0f;  // llama.cpp's yarn_attn_factor (cparams), before the ramp's own factor
  float corr_low = 0.0f, corr_high = 0.0f;  // correction dims
  float log_mul = 0.0f;      // rope.scaling.yarn_log_multiplier (deepseek2's mscale_all_dim)
};

struct ModelConfig {
  std::string arch;          // general.architecture: "gemma3", "llama", "qwen2", "qwen3", ...
  int n_layers = 0;          // trunk blocks the forward pass runs (NextN blocks excluded)
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
  // Llama 3.1's RoPE frequency factors (rope_freqs.weight, rope_dims / 2 values): pair
  // i's angle is divided by factor i, as ggml's rope with freq_factors. Empty: none.
  std::vector<float> rope_freq_factors;
  float rope_base_swa = 10000.0f;  // for sliding-window layers
  RopeYarn yarn;                   // rope.scaling.type "yarn"

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
  // The FFN-input norm's tensor name in each block: "ffn_norm", or "post_attention_norm"
  // (glm4moe names it after the attention it follows; post_norms stays false there).
  std::string ffn_norm_name = "ffn_norm";

  MoeConfig moe;
  bool mla = false;           // attention is MLA (mla below); the cache holds latents
  MlaConfig mla_dims;
  DsaConfig dsa;              // deepseek32 / glm-dsa sparse attention (dsa.n_heads > 0)
  // Multi-token-prediction (NextN) blocks stored after the trunk's n_layers blocks
  // ({arch}.nextn_predict_layers; block_count counts them). Bound, not run by Forward.
  int n_nextn_layers = 0;

  bool is_moe() const { return moe.n_expert > 0; }
  bool layer_is_moe(int il) const { return is_moe() && il >= moe.n_dense_lead; }

  int q_dim() const { return n_heads * head_dim; }
  // One K row of the cache: the KV heads' keys, then the indexer key (deepseek32, glm-dsa).
  int kv_dim() const { return n_kv_heads * head_dim + dsa.head_dim; }
  int v_dim() const { return n_kv_heads * v_head_dim; }

  // Bytes of one token's K row / V row of one layer in a KV cache of `dtype`
  // (kernels/kv_dtype.h: heads of head_dim values, fp8 with a multiplier per head).
  int64_t KeyRowBytes(KvDtype dtype) const;
  int64_t ValueRowBytes(KvDtype dtype) const;
  // Whether this architecture's attention reads a cache of `dtype`: dense attention
  // reads every dtype; MLA and sparse attention (their latent / indexer rows) read fp16
  // only, so for them any other dtype is InvalidArgument naming the architecture.
  Status CheckKvDtype(KvDtype dtype) const;
};

// Architectures Tandem can run, for error messages.
inline constexpr const char* kSupportedArchitectures =
    "gemma3, llama, qwen2, qwen3, qwen3moe, glm4moe, deepseek2, deepseek32, glm-dsa";

// Reads the config of any supported architecture (dispatches on general.architecture).
// Unimplemented naming the supported list for others.
StatusOr<ModelConfig> LoadModelConfig(const ModelSource& file);

// Per-architecture loaders (model/arch/*.cc).
StatusOr<ModelConfig> LoadGemma3Config(const ModelSource& file);
StatusOr<ModelConfig> LoadLlamaFamilyConfig(const ModelSource& file, const std::string& arch);
StatusOr<ModelConfig> LoadQwen3MoeConfig(const ModelSource& file);
StatusOr<ModelConfig> LoadGlm4MoeConfig(const ModelSource& file);
StatusOr<ModelConfig> LoadDeepseek2Config(const ModelSource& file);
StatusOr<ModelConfig> LoadGlmDsaConfig(const ModelSource& file);
StatusOr<ModelConfig> LoadDeepseek32Config(const ModelSource& file);
// DeepSeek sparse attention's indexer keys ({arch}.attention.indexer.head_count,
// key_length, top_k) into config->dsa (arch/deepseek32.cc); needs the MLA config read.
Status LoadDsaIndexerHparams(const ModelSource& file, const std::string& arch, ModelConfig* config);
// The MLA and MoE hyper-parameters deepseek2, deepseek32 and glm-dsa share, under the `arch.` keys
// (arch/deepseek2.cc); `default_gating` applies when expert_gating_func is absent.
StatusOr<ModelConfig> LoadDeepseek2FamilyConfig(const ModelSource& file, const std::string& arch,
                                                ExpertGating default_gating);

// Reads the keys every architecture shares ({arch}.block_count, ...).
Status LoadCommonHparams(const ModelSource& file, const std::string& arch, ModelConfig* config);

// Reads the expert keys every MoE architecture shares ({arch}.expert_count,
// expert_used_count, expert_feed_forward_length, expert_shared_count,
// expert_group_count, expert_group_used_count, expert_weights_scale,
// expert_weights_norm, expert_gating_func) into config->moe, with the architecture's
// defaults already set there; InvalidArgument names a key that is missing or out of range.
Status LoadMoeHparams(const ModelSource& file, ModelConfig* config);

}  // namespace tandem
