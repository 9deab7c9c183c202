// MoeFfn: the mixture-of-experts feed-forward of one layer over a batch of tokens.
//
//   logits = router · x                                  [n_tokens, n_expert]
//   probs  = softmax(logits) or sigmoid(logits)          (MoeConfig::gating)
//   chosen = top-k of probs (+ exp_probs_b, + group mask) per token, best first
//   w      = probs[chosen] (/ their sum) (* weights_scale)
//   y      = sum_i w_i · down_e(silu(gate_e · x) * (up_e · x)), e = chosen_i, in slot order
//          + the shared expert's dense FFN of x, if any
//
// Tokens are grouped by expert so each active expert runs one GEMM over exactly the
// tokens routed to it (the int8 tile kernels with enough of them); decode touches only
// the rows of the experts it selected. Every (token, expert) product is computed by the
// same kernels whatever the batch (MatMul gives a token's row the same bits alone or in
// a batch), so batching and the thread count never change a result.
//
// Expert parallelism (an ExpertExchange given): this rank holds only its experts
// (MatrixStack::NarrowTo). Each (token, slot) pair travels to the rank owning its expert
// with the token's input row (dispatch, one all-to-all), the owners run their experts
// over every pair they received, and each output row travels back (combine, a second
// all-to-all), so the weighted sum is made where the token lives, in slot order, from
// the same per-row products as on one rank: the result has the same bits. The router
// and the shared expert run on the token's own rank. Every rank of the group must call
// Run for the same layers in the same order, an idle rank with n_tokens = 0. After a
// failed collective the layer's output is zero and exchange->status() says why.
//
// Ownership: borrows the config; scratch buffers are its own.
// Thread safety: one Run at a time (it owns scratch buffers).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"
#include "model/expert_exchange.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace tandem {

class ThreadPool;

// Picks each token's experts from its router logits, as llama.cpp's build_moe_ffn does.
// logits [n_tokens, n_expert]; probs_bias [n_expert] or null. Writes experts and
// weights [n_tokens, n_expert_used], best first (descending selection score, lower
// index first on ties). Pure function; reentrant.
void RouteTokens(const MoeConfig& m, const float* logits, const float* probs_bias,
                 int64_t n_tokens, int32_t* experts, float* weights);

class MoeFfn {
 public:
  MoeFfn(const ModelConfig& config, ThreadPool* pool) : c_(config), pool_(pool) {}

  // out[n_tokens, n_embd] = the layer's MoE FFN of x[n_tokens, n_embd] (the normed input).
  // `exchange`: the expert-parallel group (w holds this rank's experts), or null.
  // Preconditions: w belongs to a layer with layer_is_moe; out does not alias x.
  void Run(const MoeWeights& w, const float* x, int64_t n_tokens, float* out,
           ExpertExchange* exchange = nullptr);

  // Time spent in this object's collectives since construction, and the bytes sent.
  double exchange_seconds() const { return exchange_seconds_; }
  int64_t exchange_bytes_sent() const { return exchange_bytes_sent_; }

 private:
  void RouteAll(const MoeWeights& w, const float* x, int64_t n);
  // Groups `rows` input rows by expert (expert_of(r)): expert_begin_, order_ (group row
  // -> input row), row_of_ (input row -> group row), active_; grows yg_ / gate_ / up_.
  template <typename ExpertOf>
  void GroupByExpert(int64_t rows, ExpertOf expert_of, int64_t extra_rows);
  // gate_in_ (and up_in_ when the up projections take another preparation) = the
  // group's `rows` input rows prepared for the experts' MatMuls. `gather`: x holds n
  // tokens, each prepared once and gathered to the rows of token_of_row_; else x holds
  // the rows themselves (n == rows).
  void PrepareGroupInputs(const MoeWeights& w, const float* x, int64_t n, int64_t rows, bool gather);
  // yg_ (group order) = every active expert's FFN of its rows of gate_in_ / up_in_.
  void RunExperts(const MoeWeights& w);
  // out[t] = sum over slots i of weights_[t, i] * y[row[t * k + i]] (rows of n_embd).
  void Combine(const float* y, const int64_t* row, int64_t n, float* out);
  void AddSharedExpert(const MoeWeights& w, const float* x, int64_t n, float* out);
  void RunSharded(const MoeWeights& w, const float* x, int64_t n, float* out, ExpertExchange* ex);

  const ModelConfig& c_;
  ThreadPool* pool_;
  // Scratch, grown on demand.
  std::vector<float> logits_;          // [n_tokens, n_expert]
  std::vector<int32_t> experts_;       // [n_tokens, k] chosen experts, best first
  std::vector<float> weights_;         // [n_tokens, k] their weights
  std::vector<int64_t> expert_begin_;  // [n_expert + 1] start of each expert's group
  std::vector<int> active_;            // experts with at least one token
  std::vector<int64_t> order_;         // [n_tokens * k] (token * k + slot), grouped by expert
  std::vector<float> xg_;              // [rows, n_embd] received inputs in group order (expert parallel)
  std::vector<int64_t> token_of_row_;  // [n_tokens * k] the token of each group row
  MatMulInput tokens_in_;              // [n_tokens] each token prepared once
  MatMulInput gate_in_, up_in_;        // [rows] the group's inputs prepared for gate / up
  bool up_takes_gate_in_ = true;       // the up projections take gate_in_
  std::vector<float> gate_, up_;       // [n_tokens * k, n_ff_exp] (and the shared expert's)
  std::vector<float> yg_;              // [n_tokens * k, n_embd] expert outputs in group order
  std::vector<int64_t> row_of_;        // [n_tokens * k] group row of (token * k + slot)
  std::vector<float> shared_;          // [n_tokens, n_embd] the shared expert's output
  // Expert parallelism: per destination rank, pairs to send / rows received; pair ->
  // its row in the send (and returned) buffer; [expert id, x] rows out and in; outputs
  // back in received order and as returned.
  std::vector<int64_t> send_rows_, recv_rows_, send_pos_;
  std::vector<float> send_, recv_, back_, returned_;
  double exchange_seconds_ = 0;
  int64_t exchange_bytes_sent_ = 0;
};

}  // namespace tandem
