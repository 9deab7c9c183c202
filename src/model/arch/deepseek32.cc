// DeepSeek-V3.2 (deepseek32): DeepSeek-V3's MLA attention and MoE (the deepseek2 family,
// see arch/deepseek2.cc) plus DeepSeek sparse attention: on every layer a lightning
// indexer keeps the top_k best cached positions for each query (DsaConfig in
// model_config.h; the forward pass in forward_dsa.cc). As llama.cpp reads these files,
// against glm-dsa (arch/glm_dsa.cc): expert_gating_func is required (no default), YaRN's
// log multiplier is read with the 0.1 of the conversion cancelled (as deepseek2's),
// there is no attention.indexer.types (every layer runs its own indexer: the key is not
// read), the indexer's RoPE pairs dims (i, i + rope/2) (NEOX) where the MLA's own RoPE
// stays adjacent-pair, and the indexer key's LayerNorm has epsilon 1e-6 (glm-dsa: 0).
#include <bit>

#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

Status LoadDsaIndexerHparams(const ModelSource& file, const std::string& arch, ModelConfig* c) {
  if (c->mla_dims.q_lora_rank < 1) {
    return InvalidArgumentError(
        arch + " needs '" + arch +
        ".attention.q_lora_rank' > 0 (the indexer's query comes from attn_q_a)");
  }
  DsaConfig& d = c->dsa;
  auto get = [&](const char* suffix, int* out) -> Status {
    const std::string key = arch + ".attention.indexer." + suffix;
    TANDEM_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key));
    if (v < 1 || v > (1u << 20)) {
      return InvalidArgumentError("metadata key '" + key +
                                  "' is out of range: " + std::to_string(v));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(get("head_count", &d.n_heads));
  TANDEM_RETURN_IF_ERROR(get("key_length", &d.head_dim));
  TANDEM_RETURN_IF_ERROR(get("top_k", &d.top_k));
  // llama.cpp rotates the indexer's queries and keys with one Walsh-Hadamard matrix of
  // the key's size, which it builds for powers of two from 64 only.
  if (d.head_dim < 64 || d.head_dim > 1024 ||
      !std::has_single_bit(static_cast<unsigned>(d.head_dim)) || d.head_dim < c->rope_dims) {
    return InvalidArgumentError(
        "metadata key '" + arch + ".attention.indexer.key_length' (" + std::to_string(d.head_dim) +
        ") must be a power of two in [64, 1024] and >= " + "rope.dimension_count (" +
        std::to_string(c->rope_dims) + ")");
  }
  d.layer_full.assign(static_cast<size_t>(c->n_layers), true);
  return Status::Ok();
}

StatusOr<ModelConfig> LoadDeepseek32Config(const ModelSource& file) {
  const std::string arch = "deepseek32";
  // llama.cpp's deepseek32 loader requires the key (glm-dsa and deepseek2 default it),
  // and its MoE graph aborts on 0 ("none"); other values LoadMoeHparams checks.
  const std::string gating_key = arch + ".expert_gating_func";
  if (file.Find(gating_key) == nullptr) {
    return InvalidArgumentError("metadata key '" + gating_key +
                                "' is missing (deepseek32 has no default)");
  }
  TANDEM_ASSIGN_OR_RETURN(uint64_t gating, file.GetUint(gating_key));
  if (gating == 0) {
    return InvalidArgumentError("metadata key '" + gating_key +
                                "' = 0 (none): deepseek32 needs 1 (softmax) or 2 (sigmoid)");
  }
  TANDEM_ASSIGN_OR_RETURN(ModelConfig c,
                          LoadDeepseek2FamilyConfig(file, arch, ExpertGating::kSigmoid));
  TANDEM_RETURN_IF_ERROR(LoadDsaIndexerHparams(file, arch, &c));
  c.dsa.rope_neox = true;
  c.dsa.k_norm_eps = 1e-6f;
  return c;
}

}  // namespace tandem
