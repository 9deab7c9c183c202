// Structured-output costs on a real vocabulary (docs/PERFORMANCE.md "Structured outputs"):
//   * compile time of a typical tool schema (JSON Schema -> grammar -> automaton);
//   * token-trie build time;
//   * mask cost per token while "generating" a reference JSON document token by token
//     (ApplyMask over the full logits row + Accept), cold (empty mask cache: every
//     state's mask computed) and warm (a second request on the same compiled grammar),
//     with 1 and with 16 requests drawing concurrently (16 threads, as the engine's
//     draws of one step would).
// Usage: grammar_bench MODEL.gguf [reps]. Timings only; no assertions.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/grammar_constraint.h"
#include "grammar/grammar_cache.h"
#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

namespace {

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

const char* kToolSchema = R"({"type": "object", "properties": {
  "location": {"type": "string", "description": "City and country"},
  "unit": {"enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "include_hourly": {"type": "boolean"},
  "fields": {"type": "array", "items": {"enum": ["temp", "wind", "rain", "uv"]}, "maxItems": 4},
  "coordinates": {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                                     "lon": {"type": "number", "minimum": -180, "maximum": 180}},
                  "required": ["lat", "lon"]}},
  "required": ["location", "unit", "days"], "additionalProperties": false})";

const char* kDocument =
    R"({"location": "Paris, France", "unit": "celsius", "days": 7, "include_hourly": true, "fields": ["temp", "wind", "rain"], "coordinates": {"lat": 48.8566, "lon": 2.3522}})";

// Per-token mask+advance time (ms) of one request generating `tokens` under `automaton`.
double RunRequest(std::shared_ptr<grammar::GrammarAutomaton> automaton, const grammar::TokenTrie& trie,
                  const Tokenizer& tok, const std::vector<int32_t>& tokens, int32_t n_vocab) {
  GrammarConstraint c(automaton, trie);
  std::vector<float> logits(n_vocab, 0.0f);
  const auto t0 = Clock::now();
  std::string so_far;
  for (int32_t t : tokens) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.ApplyMask(logits.data(), n_vocab);
    if (std::isinf(logits[t])) {
      std::fprintf(stderr, "token %d '%s' refused by the grammar after '%s'\n", t, tok.TokenToPiece(t, false).c_str(),
                   so_far.c_str());
      std::exit(1);
    }
    if (!c.Accept(tok.TokenToPiece(t, false))) std::exit(1);
    so_far += tok.TokenToPiece(t, false);
  }
  return Ms(t0, Clock::now()) / static_cast<double>(tokens.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grammar_bench MODEL.gguf [reps]\n");
    return 2;
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  auto file = GgufFile::Open(argv[1]);
  if (!file.ok()) return 1;
  auto vocab = LoadVocab(**file);
  if (!vocab.ok()) return 1;
  auto tok = Tokenizer::Create(std::move(*vocab));
  if (!tok.ok()) return 1;
  const int32_t n_vocab = (*tok)->vocab().size();
  auto t0 = Clock::now();
  std::vector<std::string> pieces(n_vocab);
  for (int32_t id = 0; id < n_vocab; ++id) pieces[id] = (*tok)->TokenToPiece(id, false);
  grammar::TokenTrie trie(pieces, (*tok)->vocab().eog_ids);
  std::printf("vocab %d tokens, trie %d nodes, built in %.1f ms\n", n_vocab, trie.num_nodes(), Ms(t0, Clock::now()));
  const std::vector<int32_t> tokens = (*tok)->Encode(kDocument, false, false);
  std::printf("reference document: %zu tokens\n", tokens.size());
  for (int rep = 0; rep < reps; ++rep) {
    t0 = Clock::now();
    auto g = grammar::CompileSpec({grammar::StructuredOutputSpec::Kind::kJsonSchema, kToolSchema});
    if (!g.ok()) {
      std::fprintf(stderr, "%s\n", g.status().message().c_str());
      return 1;
    }
    auto automaton = std::make_shared<grammar::GrammarAutomaton>(std::move(*g));
    const double compile_ms = Ms(t0, Clock::now());
    const double cold = RunRequest(automaton, trie, **tok, tokens, n_vocab);
    const double warm = RunRequest(automaton, trie, **tok, tokens, n_vocab);
    // 16 concurrent requests on a fresh automaton (cold) and again (warm).
    auto fresh = std::make_shared<grammar::GrammarAutomaton>(
        std::move(*grammar::CompileSpec({grammar::StructuredOutputSpec::Kind::kJsonSchema, kToolSchema})));
    double c16[2];
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::thread> threads;
      std::vector<double> per(16);
      const auto start = Clock::now();
      for (int i = 0; i < 16; ++i) {
        threads.emplace_back([&, i] { per[i] = RunRequest(fresh, trie, **tok, tokens, n_vocab); });
      }
      for (auto& t : threads) t.join();
      // Wall time per generated token of the batch (16 tokens per step).
      c16[pass] = Ms(start, Clock::now()) / static_cast<double>(tokens.size());
    }
    std::printf("rep %d: compile %.2f ms | concurrency 1: mask %.3f ms/token cold, %.3f warm | "
                "concurrency 16: %.3f ms per step of 16 tokens cold, %.3f warm | masks %lld, states %lld\n",
                rep, compile_ms, cold, warm, c16[0], c16[1], static_cast<long long>(automaton->masks_computed()),
                static_cast<long long>(automaton->num_states()));
  }
  return 0;
}
