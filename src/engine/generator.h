// Single-sequence text generation and perplexity over a Model, on the CPU forward.
//
// These back `tandem generate` and `tandem perplexity`; the serving engine (scheduler,
// paged KV cache) is separate and batches many sequences.
// Thread safety: functions are reentrant; each call owns its KV store and scratch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sampler.h"
#include "kernels/kv_dtype.h"

namespace tandem {

class Model;
class ThreadPool;

struct GenerateOptions {
  int max_tokens = 64;
  SamplingParams sampling;
  bool stop_at_eos = true;
  int prefill_chunk = 512;  // prompt tokens per forward call
  KvDtype kv_dtype = KvDtype::kF16;  // the KV cache's element type (--kv-cache-dtype)
};

struct GenerateStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prompt_seconds = 0;
  double decode_seconds = 0;
};

// Encodes `prompt` (with BOS per the vocab), then generates up to max_tokens, calling
// on_text with each newly completed piece of UTF-8 text.
Status Generate(const Model& model, ThreadPool* pool, const std::string& prompt,
                const GenerateOptions& options, const std::function<void(std::string_view)>& on_text,
                GenerateStats* stats, std::vector<int32_t>* output_tokens = nullptr);

// As Generate, from `prompt_tokens` as given (nothing added). Also the independent
// reference the serving engine's tests compare with (contiguous KV, one sequence).
Status GenerateFromTokens(const Model& model, ThreadPool* pool, std::vector<int32_t> prompt_tokens,
                          const GenerateOptions& options, const std::function<void(std::string_view)>& on_text,
                          GenerateStats* stats, std::vector<int32_t>* output_tokens);

struct PerplexityResult {
  int num_chunks = 0;
  int64_t scored_tokens = 0;
  double ppl = 0;
  double ppl_stderr = 0;  // uncertainty of the estimate, as llama-perplexity reports it
  double seconds = 0;
};

// llama.cpp's llama-perplexity method: tokenize the text (BOS added), split into
// non-overlapping windows of n_ctx tokens, put BOS first in each window, and score
// the second half of each window. `max_chunks` <= 0 means all. Calls on_chunk with the
// running estimate after each window. The KV cache holds `kv_dtype` (InvalidArgument
// where the architecture cannot read it).
StatusOr<PerplexityResult> Perplexity(const Model& model, ThreadPool* pool, const std::string& text,
                                      int n_ctx, int max_chunks,
                                      const std::function<void(int chunk, double ppl)>& on_chunk,
                                      KvDtype kv_dtype = KvDtype::kF16);

// Turns streamed bytes into valid UTF-8: holds back an incomplete sequence at the end,
// and replaces invalid bytes with U+FFFD (as Python's errors="replace" does), so every
// piece of text Tandem emits is valid UTF-8 (JSON requires it).
class Utf8Stream {
 public:
  // Appends bytes and returns the valid UTF-8 text now complete.
  std::string Push(std::string_view bytes);
  // Ends the stream: a held-back incomplete sequence becomes one U+FFFD.
  std::string Flush();

 private:
  std::string pending_;
};

}  // namespace tandem
