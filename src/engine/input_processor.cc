#include "engine/input_processor.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/kv_connector.h"
#include "engine/request_validation.h"
#include "grammar/token_trie.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

InputProcessor::InputProcessor(const Model& model, const EngineOptions& options, int64_t kv_capacity_tokens)
    : model_(model), options_(options), kv_capacity_tokens_(kv_capacity_tokens), rng_(std::random_device{}()) {}

InputProcessor::~InputProcessor() = default;

uint64_t InputProcessor::DrawSeed() {
  std::lock_guard<std::mutex> lock(rng_mu_);
  return rng_();
}

std::unique_ptr<Request> InputProcessor::MakeRequest(EngineRequest e, uint64_t seed) {
  const int n = static_cast<int>(e.prompt_tokens.size());
  auto r = std::make_unique<Request>(std::move(e), seed);
  r->max_tokens = std::max(1, std::min(r->params.max_tokens, options_.max_model_len - n));
  // Each choice walks the grammar on its own (its own constraint state).
  if (r->params.grammar) r->constraint = std::make_unique<GrammarConstraint>(r->params.grammar, token_trie());
  return r;
}

StatusOr<ProcessedRequest> InputProcessor::Process(EngineRequest request) {
  const int n_prompt = static_cast<int>(request.prompt_tokens.size());
  const int n_choices = request.params.n;
  if (n_choices < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(n_choices) + ".");
  if (n_choices > options_.max_num_seqs) {
    // Every choice runs at once (they share the prompt's KV), so n cannot exceed the seats.
    return InvalidArgumentError("n must be at most " + std::to_string(options_.max_num_seqs) +
                                " (--max-num-seqs), got " + std::to_string(n_choices) + ".");
  }
  if (n_choices > 1 && (request.kv_transfer.do_remote_decode || request.kv_transfer.remote_prefill)) {
    return InvalidArgumentError(
        "n > 1 is not supported with kv_transfer_params (disaggregated prefill); "
        "send n = 1");
  }
  TANDEM_RETURN_IF_ERROR(
      ValidateEngineRequest(request, model_.config().n_vocab, options_.max_model_len, kv_capacity_tokens_));
  if (request.params.priority != 0 && options_.scheduling_policy != EngineOptions::SchedulingPolicy::kPriority) {
    // vLLM's rule and message.
    return InvalidArgumentError("Got priority " + std::to_string(request.params.priority) +
                                " but Priority scheduling is not enabled.");
  }
  if (connector_ != nullptr) {
    connector_->AcceptRequest(&request.kv_transfer, n_prompt);
  } else {
    if (request.kv_transfer.remote_prefill) {
      TANDEM_LOG(WARNING) << "computing the prompt locally instead of pulling it: this instance is not a KV "
                             "consumer (--kv-transfer-config kv_role)";
    }
    request.kv_transfer = {};
  }
  ProcessedRequest out;
  out.request_id = request.request_id;
  if (n_choices == 1) {
    const uint64_t seed = request.params.has_seed ? request.params.sampling.seed : DrawSeed();
    out.requests.push_back(MakeRequest(std::move(request), seed));
    return out;
  }
  // Parallel sampling: choice 0 prefills, the others wait for its fork. Ids and seeds
  // follow vLLM's ParentRequest.
  Request* first = nullptr;
  for (int i = 0; i < n_choices; ++i) {
    EngineRequest e;
    e.request_id = std::to_string(i) + "_" + request.request_id;
    e.prompt_tokens = request.prompt_tokens;
    e.params = request.params;
    e.params.n = 1;
    e.on_output = request.on_output;
    const uint64_t seed =
        request.params.has_seed ? request.params.sampling.seed + static_cast<uint64_t>(i) : DrawSeed();
    std::unique_ptr<Request> r = MakeRequest(std::move(e), seed);
    r->choice_index = i;
    r->family_id = request.request_id;
    if (first == nullptr) {
      first = r.get();
    } else {
      r->fork_parent = first;
      first->fork_children.push_back(r.get());
    }
    out.requests.push_back(std::move(r));
  }
  return out;
}

const grammar::TokenTrie& InputProcessor::token_trie() {
  std::call_once(trie_once_, [this] {
    const Tokenizer& tok = model_.tokenizer();
    std::vector<std::string> pieces(model_.config().n_vocab);
    for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
      // Control and unused tokens never appear in constrained text (their piece is "").
      pieces[id] = tok.TokenToPiece(id, /*special=*/false);
    }
    trie_ = std::make_unique<grammar::TokenTrie>(pieces, tok.vocab().eog_ids);
  });
  return *trie_;
}

}  // namespace tandem
