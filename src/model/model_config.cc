#include "model/model_config.h"

#include "model/gguf_file.h"

namespace tandem {

Status LoadCommonHparams(const GgufFile& file, const std::string& arch, ModelConfig* c) {
  c->arch = arch;
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  auto get_int = [&](const char* suffix, int* out) -> Status {
    TANDEM_ASSIGN_OR_RETURN(uint64_t v, file.GetUint(key(suffix)));
    if (v == 0 || v > (1u << 24)) {
      return InvalidArgumentError("metadata key '" + key(suffix) + "' is out of range: " + std::to_string(v));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(get_int("block_count", &c->n_layers));
  TANDEM_RETURN_IF_ERROR(get_int("embedding_length", &c->n_embd));
  TANDEM_RETURN_IF_ERROR(get_int("attention.head_count", &c->n_heads));
  TANDEM_RETURN_IF_ERROR(get_int("feed_forward_length", &c->n_ff));
  TANDEM_RETURN_IF_ERROR(get_int("context_length", &c->context_length));
  c->n_kv_heads = c->n_heads;
  if (file.Find(key("attention.head_count_kv"))) TANDEM_RETURN_IF_ERROR(get_int("attention.head_count_kv", &c->n_kv_heads));
  if (c->n_heads % c->n_kv_heads != 0) {
    return InvalidArgumentError("head_count " + std::to_string(c->n_heads) +
                                " is not a multiple of head_count_kv " + std::to_string(c->n_kv_heads));
  }
  c->head_dim = c->n_embd / c->n_heads;
  if (file.Find(key("attention.key_length"))) TANDEM_RETURN_IF_ERROR(get_int("attention.key_length", &c->head_dim));
  c->v_head_dim = c->head_dim;
  if (file.Find(key("attention.value_length"))) TANDEM_RETURN_IF_ERROR(get_int("attention.value_length", &c->v_head_dim));
  if (c->v_head_dim != c->head_dim) {
    return UnimplementedError("value_length != key_length is not supported");
  }
  c->rope_dims = c->head_dim;
  if (file.Find(key("rope.dimension_count"))) TANDEM_RETURN_IF_ERROR(get_int("rope.dimension_count", &c->rope_dims));
  if (c->rope_dims > c->head_dim || c->rope_dims % 2 != 0) {
    return InvalidArgumentError("rope.dimension_count must be even and <= the head size");
  }
  TANDEM_ASSIGN_OR_RETURN(double eps, file.GetFloatOr(key("attention.layer_norm_rms_epsilon"), 1e-6));
  c->rms_eps = static_cast<float>(eps);
  TANDEM_ASSIGN_OR_RETURN(double base, file.GetFloatOr(key("rope.freq_base"), 10000.0));
  c->rope_base = static_cast<float>(base);
  TANDEM_ASSIGN_OR_RETURN(std::string scaling, file.GetStringOr(key("rope.scaling.type"), "none"));
  if (scaling == "linear") {
    TANDEM_ASSIGN_OR_RETURN(double factor, file.GetFloatOr(key("rope.scaling.factor"), 1.0));
    if (factor <= 0) return InvalidArgumentError("rope.scaling.factor must be positive");
    c->rope_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    return UnimplementedError("rope scaling type '" + scaling + "' is not supported (none, linear)");
  }
  c->layer_is_swa.assign(c->n_layers, false);
  return Status::Ok();
}

StatusOr<ModelConfig> LoadModelConfig(const GgufFile& file) {
  TANDEM_ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
  StatusOr<ModelConfig> config = [&]() -> StatusOr<ModelConfig> {
    if (arch == "gemma3") return LoadGemma3Config(file);
    if (arch == "llama" || arch == "qwen2" || arch == "qwen3") return LoadLlamaFamilyConfig(file, arch);
    return UnimplementedError("unsupported architecture '" + arch + "' (supported: " +
                              kSupportedArchitectures + ")");
  }();
  if (!config.ok()) return config.status();
  if (const GgufValue* tokens = file.Find("tokenizer.ggml.tokens")) {
    config->n_vocab = static_cast<int>(tokens->array.size());
  }
  return config;
}

}  // namespace tandem
