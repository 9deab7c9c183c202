// The engine's option normalisation and KV cache sizing, as free functions (vLLM's
// kv_cache_utils): what Engine::Create checks and derives before anything is allocated.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "engine/engine.h"

namespace tandem {

class Model;
struct ModelConfig;

// The scheduler limits every caller of the engine must respect, checked in one place
// (`tandem serve` calls it at flag time, Engine::Create again for library callers):
// InvalidArgument naming the flag for a block size outside [1, 1024], a non-positive
// --max-num-seqs or --max-num-batched-tokens, or a non-positive queue bound.
Status ValidateSchedulerLimits(const EngineOptions& options);

// Whether the options ask for MTP speculation (the KV blocks then carry one more layer).
bool UsesMtp(const EngineOptions& options);

// KV layers per block: the trunk's, plus the NextN block's with MTP speculation.
int KvLayers(const ModelConfig& config, const EngineOptions& options);

// The model part of every KV block key, of the PD transfer handshake and of pool keys:
// blocks that carry a NextN layer never mix with blocks that do not (another layout),
// nor blocks of one KV dtype with another's (an fp16 cache keeps the plain fingerprint).
std::string KvFingerprint(const Model& model, const EngineOptions& options);

// The KV cache's shape for one engine.
struct KvCacheSpec {
  int n_layers = 0;               // KvLayers
  int64_t key_row_bytes = 0;      // one token's K row in one layer
  int64_t value_row_bytes = 0;    // one token's V row in one layer
  int64_t block_bytes = 0;        // one block: every layer's K and V rows of block_size tokens
  int64_t num_blocks = 0;
};

// Checks `options` against the model and fills what they leave open: max_model_len
// (0 = the model's context; shrunk, with a warning, to what the cache holds), the KV
// cache's shape (num_kv_blocks from kv_cache_bytes when 0), and refuses what cannot run
// (InvalidArgument): limits ValidateSchedulerLimits refuses, an MTP method on a model
// without NextN layers, a KV dtype the model's attention cannot store, a budget of
// fewer than 2 blocks, more than 2^30 blocks, and --no-enable-chunked-prefill with
// --max-num-batched-tokens below --max-model-len (a prompt could never be scheduled).
// Logs the cache's size.
StatusOr<KvCacheSpec> NormalizeEngineOptions(const Model& model, EngineOptions* options);

}  // namespace tandem
