// ValidateEngineRequest: what Engine::AddRequest refuses before queueing a request.
// Thread safety: a pure function.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/engine.h"

namespace tandem {

// InvalidArgument (with vLLM's wording where vLLM has one) for an empty prompt, no
// callback, a prompt of max_model_len tokens or more, a prompt or logit_bias token
// outside [0, n_vocab), or a prompt that cannot fit `kv_capacity_tokens`.
Status ValidateEngineRequest(const EngineRequest& request, int32_t n_vocab, int max_model_len,
                             int64_t kv_capacity_tokens);

}  // namespace tandem
