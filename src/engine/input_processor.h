// InputProcessor: turns an EngineRequest into the engine's Requests on the caller's
// thread, before anything is queued (vLLM's InputProcessor): the admission rules, the
// request's seed and max_tokens clamp, its structured-output constraint, and the n > 1
// expansion into choices.
//
// Thread safety: Process may be called from any thread at once (the seed source is
// guarded; the vocabulary's token trie is built once, on first use). The connector, set
// once before the first Process, is only read.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/request.h"

namespace tandem {

class KvConnector;
class Model;
namespace grammar {
class TokenTrie;
}

// The requests one EngineRequest becomes: one, or its n choices (ids "<i>_<id>", the
// first prefilling and the others waiting for its fork, Request::fork_parent).
struct ProcessedRequest {
  std::string request_id;                         // the client's id
  std::vector<std::unique_ptr<Request>> requests;  // in choice order; arrival_seq unset
};

class InputProcessor {
 public:
  // `model` outlives the processor. `options` are the engine's, normalised
  // (NormalizeEngineOptions); `kv_capacity_tokens`: tokens the KV cache holds.
  InputProcessor(const Model& model, const EngineOptions& options, int64_t kv_capacity_tokens);
  ~InputProcessor();

  // Borrowed; set once before the first Process (null = no connector).
  void set_connector(const KvConnector* connector) { connector_ = connector; }

  // The admission rules (InvalidArgument with vLLM's wording where vLLM has one): n
  // outside [1, max_num_seqs], n > 1 with kv_transfer_params, a nonzero priority under
  // fcfs, and what ValidateEngineRequest refuses. The connector drops the parts of
  // kv_transfer it cannot honour (with no connector, all of them, logged).
  StatusOr<ProcessedRequest> Process(EngineRequest request);

  // The vocabulary's token trie (structured outputs), built on first use: ~262k pieces
  // sorted, a fraction of a second paid by the first constrained request.
  const grammar::TokenTrie& token_trie();

 private:
  // A Request for `e` with `seed`, its max_tokens clamped to the context and its
  // constraint built.
  std::unique_ptr<Request> MakeRequest(EngineRequest e, uint64_t seed);
  uint64_t DrawSeed();

  const Model& model_;
  const EngineOptions& options_;
  const int64_t kv_capacity_tokens_;
  const KvConnector* connector_ = nullptr;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // guarded by rng_mu_: seeds of requests that bring none
  std::once_flag trie_once_;
  std::unique_ptr<grammar::TokenTrie> trie_;  // set once by token_trie()
};

}  // namespace tandem
