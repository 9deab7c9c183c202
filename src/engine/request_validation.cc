#include "engine/request_validation.h"

#include <string>

namespace tandem {

Status ValidateEngineRequest(const EngineRequest& request, int32_t n_vocab, int max_model_len,
                             int64_t kv_capacity_tokens) {
  const int n = static_cast<int>(request.prompt_tokens.size());
  if (n == 0) return InvalidArgumentError("the prompt is empty");
  if (!request.on_output) return InvalidArgumentError("no output callback");
  if (n >= max_model_len) {
    return InvalidArgumentError("This model's maximum context length is " + std::to_string(max_model_len) +
                                " tokens. However, your request has " + std::to_string(n) +
                                " input tokens. Please reduce the length of the input messages.");
  }
  for (const auto& [t, bias] : request.params.logit_bias) {
    if (t < 0 || t >= n_vocab) {
      return InvalidArgumentError("logit_bias: token id " + std::to_string(t) + " is out of vocabulary range [0, " +
                                  std::to_string(n_vocab) + ")");
    }
  }
  for (int32_t t : request.prompt_tokens) {
    if (t < 0 || t >= n_vocab) {
      return InvalidArgumentError("token id " + std::to_string(t) + " is out of vocabulary range [0, " +
                                  std::to_string(n_vocab) + ")");
    }
  }
  if (static_cast<int64_t>(n) + 1 > kv_capacity_tokens) {
    return InvalidArgumentError("the prompt of " + std::to_string(n) + " tokens does not fit the KV cache (" +
                                std::to_string(kv_capacity_tokens) + " tokens)");
  }
  return Status::Ok();
}

}  // namespace tandem
