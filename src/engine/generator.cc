#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "model/forward.h"
#include "model/kv_store.h"
#include "model/model.h"

namespace tandem {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Length of the valid UTF-8 sequence starting at s[i] (1..4), 0 if the bytes present
// are a valid but incomplete start of one, or -1 if s[i] does not start a valid sequence
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
int SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char x = b(k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return -1;
  }
  return need;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string Utf8Stream::Push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const int n = SequenceLength(pending_, i);
    if (n == 0) break;  // incomplete: wait for more bytes
    if (n < 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(pending_, i, n);
      i += n;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::Flush() {
  // Whatever is left is an incomplete sequence that will never complete.
  std::string out = pending_.empty() ? "" : std::string(kReplacement);
  pending_.clear();
  return out;
}

Status Generate(const Model& model, ThreadPool* pool, const std::string& prompt,
                const GenerateOptions& options, const std::function<void(std::string_view)>& on_text,
                GenerateStats* stats, std::vector<int32_t>* output_tokens) {
  std::vector<int32_t> tokens = model.tokenizer().Encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (tokens.empty()) return InvalidArgumentError("the prompt encodes to no tokens");
  return GenerateFromTokens(model, pool, tokens, options, on_text, stats, output_tokens);
}

Status GenerateFromTokens(const Model& model, ThreadPool* pool, std::vector<int32_t> tokens,
                          const GenerateOptions& options, const std::function<void(std::string_view)>& on_text,
                          GenerateStats* stats, std::vector<int32_t>* output_tokens) {
  const ModelConfig& c = model.config();
  const Tokenizer& tok = model.tokenizer();
  if (tokens.empty()) return InvalidArgumentError("the prompt has no tokens");
  const int64_t capacity = std::min<int64_t>(c.context_length, static_cast<int64_t>(tokens.size()) + options.max_tokens);
  if (static_cast<int64_t>(tokens.size()) >= capacity) {
    return InvalidArgumentError("prompt of " + std::to_string(tokens.size()) +
                                " tokens does not fit the context of " + std::to_string(c.context_length));
  }
  TANDEM_RETURN_IF_ERROR(c.CheckKvDtype(options.kv_dtype));
  ContiguousKvStore kv(c.n_layers, capacity, c.KeyRowBytes(options.kv_dtype),
                       c.ValueRowBytes(options.kv_dtype), options.kv_dtype);
  Forward forward(c, model.weights(), pool);
  std::vector<float> logits;
  GenerateStats local;
  local.prompt_tokens = static_cast<int>(tokens.size());

  auto t0 = std::chrono::steady_clock::now();
  const int chunk = std::max(1, options.prefill_chunk);
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    ForwardSequence s;
    s.tokens = tokens.data() + begin;
    s.n_tokens = static_cast<int>(std::min<size_t>(chunk, tokens.size() - begin));
    s.start_pos = static_cast<int64_t>(begin);
    s.kv = &kv;
    forward.Run({s}, &logits);
  }
  local.prompt_seconds = SecondsSince(t0);

  Sampler sampler(options.sampling);
  Utf8Stream utf8;
  int64_t pos = static_cast<int64_t>(tokens.size());
  t0 = std::chrono::steady_clock::now();
  while (local.generated_tokens < options.max_tokens) {
    int32_t next = sampler.Sample(logits.data(), c.n_vocab);
    if (options.stop_at_eos && tok.IsEog(next)) break;
    ++local.generated_tokens;
    if (output_tokens) output_tokens->push_back(next);
    std::string text = utf8.Push(tok.TokenToPiece(next, /*special=*/false));
    if (!text.empty()) on_text(text);
    if (local.generated_tokens == options.max_tokens || pos >= capacity) break;
    ForwardSequence s;
    s.tokens = &next;
    s.n_tokens = 1;
    s.start_pos = pos++;
    s.kv = &kv;
    forward.Run({s}, &logits);
  }
  std::string rest = utf8.Flush();
  if (!rest.empty()) on_text(rest);
  local.decode_seconds = SecondsSince(t0);
  if (stats) *stats = local;
  return Status::Ok();
}

StatusOr<PerplexityResult> Perplexity(const Model& model, ThreadPool* pool, const std::string& text,
                                      int n_ctx, int max_chunks,
                                      const std::function<void(int, double)>& on_chunk,
                                      KvDtype kv_dtype) {
  const ModelConfig& c = model.config();
  const Tokenizer& tok = model.tokenizer();
  if (n_ctx < 4) return InvalidArgumentError("--ctx must be at least 4");
  if (n_ctx > c.context_length) {
    return InvalidArgumentError("--ctx " + std::to_string(n_ctx) + " exceeds the model's context of " +
                                std::to_string(c.context_length));
  }
  std::vector<int32_t> tokens = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  int n_chunks = static_cast<int>(tokens.size() / n_ctx);
  if (n_chunks == 0) {
    return InvalidArgumentError("the text has " + std::to_string(tokens.size()) +
                                " tokens; perplexity with --ctx " + std::to_string(n_ctx) +
                                " needs at least " + std::to_string(n_ctx));
  }
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  const bool add_bos = tok.vocab().add_bos && tok.vocab().bos_id >= 0;
  const int first = n_ctx / 2;

  PerplexityResult result;
  auto t0 = std::chrono::steady_clock::now();
  Forward forward(c, model.weights(), pool);
  TANDEM_RETURN_IF_ERROR(c.CheckKvDtype(kv_dtype));
  ContiguousKvStore kv(c.n_layers, n_ctx, c.KeyRowBytes(kv_dtype), c.ValueRowBytes(kv_dtype),
                       kv_dtype);
  std::vector<float> logits;
  double nll = 0, nll2 = 0;
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> window(tokens.begin() + static_cast<int64_t>(chunk) * n_ctx,
                                tokens.begin() + static_cast<int64_t>(chunk + 1) * n_ctx);
    if (add_bos) window[0] = tok.vocab().bos_id;
    ForwardSequence s;
    s.tokens = window.data();
    s.n_tokens = n_ctx;
    s.start_pos = 0;
    s.kv = &kv;
    s.all_logits = true;
    forward.Run({s}, &logits);
    for (int j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<int64_t>(j) * c.n_vocab;
      const int32_t target = tokens[static_cast<int64_t>(chunk) * n_ctx + j + 1];
      float max = row[0];
      for (int v = 1; v < c.n_vocab; ++v) max = std::max(max, row[v]);
      double sum = 0;
      for (int v = 0; v < c.n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      const double token_nll = -(static_cast<double>(row[target]) - max - std::log(sum));
      nll += token_nll;
      nll2 += token_nll * token_nll;
      ++result.scored_tokens;
    }
    result.num_chunks = chunk + 1;
    if (on_chunk) on_chunk(chunk, std::exp(nll / result.scored_tokens));
  }
  const double mean = nll / result.scored_tokens;
  result.ppl = std::exp(mean);
  const double var = nll2 / result.scored_tokens - mean * mean;
  result.ppl_stderr = result.scored_tokens > 1 && var > 0
                          ? std::sqrt(var / (result.scored_tokens - 1)) * result.ppl
                          : 0.0;
  result.seconds = SecondsSince(t0);
  return result;
}

}  // namespace tandem
