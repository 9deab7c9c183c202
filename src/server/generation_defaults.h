// The sampling defaults a server applies to requests that leave fields out, as vLLM's
// `--generation-config` and `--override-generation-config` choose them:
//   auto   (the default) the model's generation_config.json when the model is a
//          Hugging Face checkpoint directory that has one (a GGUF file has none);
//   vllm   none: OpenAI's defaults (temperature 1, top_p 1, ...);
//   DIR    DIR/generation_config.json (an error if it is missing).
// Keys taken (vLLM's list): temperature, top_p, top_k, min_p, repetition_penalty and
// max_new_tokens (caps the default max_tokens); other keys are not sampling defaults.
// The override JSON object (same keys, plus max_new_tokens) wins over the file.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "common/status.h"
#include "server/openai_request.h"

namespace tandem::server {

// InvalidArgument naming the file or flag and the key for a file that is not JSON, a key
// of the wrong type or range, or a mode that is none of the above.
StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& mode, const std::string& model_path,
                                                    const std::string& override_json);

// "temperature=0.6 top_p=0.95" (for the log line); "" when `d` is empty.
std::string DescribeGenerationDefaults(const GenerationDefaults& d);

}  // namespace tandem::server
