// GLM-5 (glm-dsa): DeepSeek-V3's MLA attention and MoE (the deepseek2 family, see
// arch/deepseek2.cc) plus DeepSeek sparse attention: a lightning indexer per layer that
// keeps the top_k best cached positions for each query (DsaConfig in model_config.h;
// the forward pass in forward_dsa.cc). As llama.cpp reads these files: the router is
// sigmoid unless expert_gating_func says otherwise, YaRN's log multiplier is not read,
// and without attention.indexer.types every layer runs its own indexer for files
// trained below 1M tokens of context (GLM-5, 5.1) while GLM-5.2-style files (1M) default
// to full indexers on layers 0, 1, 2 and every fourth layer from 6, the rest shared.
// Its indexer's RoPE is adjacent-pair and its key's LayerNorm has epsilon 0 (deepseek32,
// arch/deepseek32.cc, shares the indexer keys and differs there).
#include "model/model_source.h"
#include "model/model_config.h"

namespace tandem {

namespace {

// The indexer.types default of llama.cpp for files without the key.
std::vector<bool> DefaultIndexerTypes(const ModelConfig& c) {
  std::vector<bool> full(static_cast<size_t>(c.n_layers), true);
  if (c.context_length < (1 << 20)) return full;
  for (int il = 0; il < c.n_layers; ++il) full[il] = il < 3 || (il >= 6 && (il - 6) % 4 == 0);
  return full;
}

}  // namespace

StatusOr<ModelConfig> LoadGlmDsaConfig(const ModelSource& file) {
  const std::string arch = "glm-dsa";
  TANDEM_ASSIGN_OR_RETURN(ModelConfig c, LoadDeepseek2FamilyConfig(file, arch, ExpertGating::kSigmoid));
  TANDEM_RETURN_IF_ERROR(LoadDsaIndexerHparams(file, arch, &c));
  DsaConfig& d = c.dsa;
  const std::string types_key = arch + ".attention.indexer.types";
  if (const GgufValue* types = file.Find(types_key)) {
    const size_t n = types->array.size();
    if (types->type != GgufValueType::kArray ||
        (n != static_cast<size_t>(c.n_layers) && n != static_cast<size_t>(c.n_layers + c.n_nextn_layers))) {
      return InvalidArgumentError("metadata key '" + types_key + "' must be an array of " +
                                  std::to_string(c.n_layers) + " flags (one per layer)");
    }
    d.layer_full.resize(static_cast<size_t>(c.n_layers));
    for (int il = 0; il < c.n_layers; ++il) {
      const GgufValue& v = types->array[il];
      d.layer_full[il] = v.type == GgufValueType::kBool ? v.b : (v.IsInteger() && (v.u64 != 0 || v.i64 != 0));
    }
  } else {
    d.layer_full = DefaultIndexerTypes(c);
  }
  if (!d.layer_full[0]) {
    return InvalidArgumentError("metadata key '" + types_key +
                                "': layer 0 must run its own indexer (a shared layer reuses an earlier one's choice)");
  }
  return c;
}

}  // namespace tandem
