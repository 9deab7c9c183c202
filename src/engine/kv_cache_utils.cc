#include "engine/kv_cache_utils.h"

#include "common/logging.h"
#include "model/model.h"

namespace tandem {

Status ValidateSchedulerLimits(const EngineOptions& o) {
  if (o.block_size <= 0 || o.block_size > 1024) {
    return InvalidArgumentError("--block-size must be in [1, 1024], got " + std::to_string(o.block_size));
  }
  if (o.max_num_seqs <= 0) return InvalidArgumentError("--max-num-seqs must be positive");
  if (o.max_num_batched_tokens <= 0) return InvalidArgumentError("--max-num-batched-tokens must be positive");
  if (o.max_waiting <= 0) return InvalidArgumentError("--max-waiting-requests must be positive");
  return Status::Ok();
}

bool UsesMtp(const EngineOptions& o) { return o.speculative.method == SpeculativeOptions::Method::kMtp; }

int KvLayers(const ModelConfig& c, const EngineOptions& o) { return c.n_layers + (UsesMtp(o) ? 1 : 0); }

std::string KvFingerprint(const Model& model, const EngineOptions& o) {
  std::string f = UsesMtp(o) ? model.fingerprint() + ":mtp" : model.fingerprint();
  if (o.kv_cache_dtype != KvDtype::kF16) f += std::string(":kv-") + KvDtypeName(o.kv_cache_dtype);
  return f;
}

StatusOr<KvCacheSpec> NormalizeEngineOptions(const Model& model, EngineOptions* options) {
  EngineOptions& o = *options;
  const ModelConfig& c = model.config();
  TANDEM_RETURN_IF_ERROR(ValidateSchedulerLimits(o));
  if (o.max_model_len <= 0) o.max_model_len = c.context_length;
  if (o.max_model_len > c.context_length) {
    TANDEM_LOG(WARNING) << "--max-model-len " << o.max_model_len << " exceeds the model's context "
                        << c.context_length;
  }
  if (UsesMtp(o) && (c.n_nextn_layers == 0 || model.weights().nextn.empty())) {
    return InvalidArgumentError("--speculative-config: an MTP method needs the model's NextN (MTP) layers; " +
                                model.name() + " has none (" + c.arch + ".nextn_predict_layers = " +
                                std::to_string(c.n_nextn_layers) + ")");
  }
  KvCacheSpec spec;
  spec.n_layers = KvLayers(c, o);
  if (UsesMtp(o)) {
    TANDEM_LOG(INFO) << "MTP speculation: NextN block 0 drafts up to " << o.speculative.num_speculative_tokens
                     << " tokens; its K/V rows ride in every KV block (KV fingerprint " << KvFingerprint(model, o)
                     << ")"
                     << (c.dsa.n_heads > 0 ? "; the NextN block attends densely (its sparse-attention indexer is "
                                             "not run)"
                                           : "");
  }
  TANDEM_RETURN_IF_ERROR(c.CheckKvDtype(o.kv_cache_dtype));
  spec.key_row_bytes = c.KeyRowBytes(o.kv_cache_dtype);
  spec.value_row_bytes = c.ValueRowBytes(o.kv_cache_dtype);
  spec.block_bytes = spec.n_layers * (spec.key_row_bytes + spec.value_row_bytes) * o.block_size;
  spec.num_blocks = o.num_kv_blocks > 0 ? o.num_kv_blocks : o.kv_cache_bytes / spec.block_bytes;
  if (spec.num_blocks < 2) {
    return InvalidArgumentError("the KV cache budget of " + std::to_string(o.kv_cache_bytes) +
                                " bytes holds fewer than 2 blocks of " + std::to_string(spec.block_bytes) + " bytes");
  }
  if (spec.num_blocks > (int64_t{1} << 30)) return InvalidArgumentError("too many KV blocks");
  o.num_kv_blocks = spec.num_blocks;
  const int64_t capacity_tokens = spec.num_blocks * o.block_size;
  // One sequence of max_model_len tokens must fit the cache, or a lone request could
  // neither run nor be preempted in favour of another (vLLM refuses to start then; we
  // shrink the limit and say so).
  if (static_cast<int64_t>(o.max_model_len) > capacity_tokens) {
    TANDEM_LOG(WARNING) << "the KV cache holds " << capacity_tokens << " tokens, fewer than --max-model-len "
                        << o.max_model_len << "; limiting requests to " << capacity_tokens << " tokens";
    o.max_model_len = static_cast<int>(capacity_tokens);
  }
  if (!o.enable_chunked_prefill && o.max_num_batched_tokens < o.max_model_len) {
    // vLLM's rule: without chunking a prompt runs in one step, so the step budget must
    // hold the longest one.
    return InvalidArgumentError("--max-num-batched-tokens (" + std::to_string(o.max_num_batched_tokens) +
                                ") is smaller than --max-model-len (" + std::to_string(o.max_model_len) +
                                ") with chunked prefill disabled: raise --max-num-batched-tokens, lower "
                                "--max-model-len, or enable chunked prefill");
  }
  TANDEM_LOG(INFO) << "KV cache: " << KvDtypeName(o.kv_cache_dtype) << ", " << spec.num_blocks << " blocks of "
                   << o.block_size << " tokens (" << spec.block_bytes << " bytes each), " << capacity_tokens
                   << " tokens fit (" << spec.block_bytes / o.block_size << " bytes per token); prefix caching "
                   << (o.enable_prefix_caching ? "on" : "off") << "; chunked prefill "
                   << (o.enable_chunked_prefill ? "on" : "off");
  return spec;
}

}  // namespace tandem
