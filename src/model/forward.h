// Forward: the transformer forward pass over one ragged batch (CPU, float32 activations).
//
// A batch holds several sequences, each contributing `n_tokens` new tokens at
// positions start_pos .. start_pos+n_tokens-1, whose keys/values are written into that
// sequence's KvStore (positions before start_pos must already be there). Logits are
// produced for every new token of a sequence with all_logits, else for its last token,
// and none for a sequence with want_logits = false.
//
// Ownership: borrows the config, weights and thread pool, which must outlive it.
// Thread safety: one Run at a time (it owns scratch buffers).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/kv_store.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/moe_ffn.h"

namespace tandem {

class ThreadPool;

struct ForwardSequence {
  const int32_t* tokens = nullptr;  // [n_tokens] (borrowed)
  int n_tokens = 0;
  int64_t start_pos = 0;
  KvStore* kv = nullptr;            // borrowed; capacity >= start_pos + n_tokens
  bool all_logits = false;
  bool want_logits = true;          // false: no logits row (a prompt chunk that ends mid-prompt)
};

class Forward {
 public:
  Forward(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool);

  // Runs the batch; `logits` receives [n_logit_rows, n_vocab] floats in sequence order;
  // `hidden` (optional) receives [n_tokens, n_embd]: every token's final hidden state
  // after output_norm (what a NextN block takes, as llama.cpp's h_nextn).
  // Preconditions: every token id in [0, n_vocab); positions fit each KvStore.
  void Run(const std::vector<ForwardSequence>& batch, std::vector<float>* logits,
           std::vector<float>* hidden = nullptr);

  // NextN (multi-token prediction) block `j` < config.n_nextn_layers, as llama.cpp's MTP
  // graph: token t of the batch at its position with h[t] ([n_tokens, n_embd], the hidden
  // state of the position before, as Run or this returns it) ->
  // eh_proj(concat(enorm(embed(token)), hnorm(h))) -> the block (attention over its own
  // KV rows, layer n_layers + j of each store; then its MoE) -> shared_head_norm (else
  // output_norm). `hidden` receives that for every token; `logits` the rows of
  // shared_head_head (else output) as Run gives them.
  // Preconditions: as Run's, and every store has n_layers + j + 1 layers.
  void RunNextn(int j, const std::vector<ForwardSequence>& batch, const float* h, std::vector<float>* logits,
                std::vector<float>* hidden);

  // Expert parallelism: the trunk's MoE layers exchange tokens through `exchange`
  // (borrowed; the weights hold this rank's experts). NextN blocks run locally.
  void set_expert_exchange(ExpertExchange* exchange) { exchange_ = exchange; }
  // An idle rank's turn in a step of its expert-parallel group: every trunk MoE layer's
  // collectives with no tokens of its own (vLLM's dummy batch), serving the other ranks'.
  void RunExpertParallelIdle();
  // Seconds spent in the MoE collectives and bytes sent to other ranks, since creation.
  double expert_exchange_seconds() const { return moe_.exchange_seconds(); }
  int64_t expert_exchange_bytes_sent() const { return moe_.exchange_bytes_sent(); }

  // Sparse attention's choices, for comparing with llama.cpp's (tests): while set
  // (borrowed; nullptr: off), every trunk layer that runs its own indexer appends, for
  // each batch token past the indexer's top_k, the sorted positions it attends to.
  struct DsaChoice {
    int layer = 0;
    int64_t pos = 0;
    std::vector<int32_t> kept;
  };
  void set_dsa_trace(std::vector<DsaChoice>* trace) { dsa_trace_ = trace; }

  // Named intermediate tensors, for comparing with llama.cpp's graph (`tandem
  // dump-tensors`, tools/compare_tensors.py): while set (borrowed; nullptr: off), Run
  // calls it with llama.cpp's names and the batch's rows [n_rows, width]: per trunk layer
  // "attn_norm-L" (the normed input), "kqv_out-L" (MLA layers: the heads' attention
  // output before the output projection), "attn_out-L" (attention after its output
  // projection, before any post-norm), "ffn_inp-L" (the residual stream after attention),
  // "ffn_norm-L", "ffn_out-L" (the FFN / MoE output, shared experts included, before any
  // post-norm), "l_out-L"; then "result_norm" and "result_output" (the logits rows).
  using TensorTrace = std::function<void(const std::string& name, const float* rows, int64_t n_rows, int64_t width)>;
  void set_tensor_trace(const TensorTrace* trace) { tensor_trace_ = trace; }

 private:
  // Token embeddings of the batch into x_ (scaled by embd_scale when `scale`), and
  // pos_ / seq_of_. Returns the token count.
  int64_t Embed(const std::vector<ForwardSequence>& batch, const WeightMatrix& table, bool scale);
  // Trunk layer il < n_layers, or NextN block il - n_layers: x_ in, x_ out.
  void Block(int il, const std::vector<ForwardSequence>& batch);
  const LayerWeights& LayerAt(int il) const {
    return il < c_.n_layers ? w_.layers[il] : w_.nextn_layers[il - c_.n_layers];
  }
  // Dense attention of `layer` (forward_attention.cc): q_, k_, v_ in (K/V rows stored),
  // att_ out. A sequence with kTiledMinQueries or more new tokens takes the tiled
  // kernel, every other token the per-token one (per_token_ lists them); both give
  // the same bits.
  void Attention(int layer, const std::vector<ForwardSequence>& batch);
  void AttentionPerToken(int layer, const std::vector<ForwardSequence>& batch, bool swa);
  void AttentionTiled(int layer, const std::vector<ForwardSequence>& batch, bool swa);
  static constexpr int kTiledMinQueries = 8;
  // MLA attention of `layer` (forward_mla.cc): xn_ in, proj_ (after attn_output) out.
  void MlaAttention(int layer, const std::vector<ForwardSequence>& batch);
  // DeepSeek sparse attention's lightning indexer of `layer` (forward_dsa.cc): from xn_ and the normed
  // q_a output (mla_qa_), stores each token's indexer key in its K row (after the
  // latent and RoPE parts) and fills dsa_sel_ with the positions each token attends to.
  // A shared layer keeps the selection of the full layer before it.
  void DsaSelect(int layer, const std::vector<ForwardSequence>& batch);
  void InitDsa();  // builds dsa_rot_
  // [n_tokens, rope_dims] cos/sin of the batch's positions for the global or the
  // sliding-window base, computed on first use in a Run.
  const std::vector<float>& RopeAnglesOfBatch(bool swa);
  // Normalises x_ with `norm` (every row into `hidden` when given) and multiplies the
  // rows that want logits by `head`.
  void LmHead(const std::vector<ForwardSequence>& batch, const std::vector<float>& norm, const WeightMatrix& head,
              std::vector<float>* logits, std::vector<float>* hidden);

  const ModelConfig& c_;
  const ModelWeights& w_;
  ThreadPool* pool_;
  MoeFfn moe_;  // the FFN of MoE layers
  ExpertExchange* exchange_ = nullptr;
  // Scratch, [n_tokens, width] each, grown on demand.
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_;
  std::vector<float> eh_;  // [n_tokens, 2 * n_embd]: a NextN block's concat(enorm(e), hnorm(h))
  // MLA scratch: [n_tokens, q_lora_rank], [n_tokens, n_heads, nope + rope],
  // [n_tokens, kv_lora + rope], [n_tokens, n_heads, kv_lora + rope] (absorbed queries),
  // [n_tokens, n_heads, kv_lora] (attention over latents), [n_tokens, n_heads, v_head_dim].
  std::vector<float> mla_qa_, mla_q_, mla_kv_, mla_qabs_, mla_lat_, mla_out_;
  // Each sequence's latents of this step, transposed (MlaAttention): at mla_vt_off_[s],
  // mla_vt_len_[s] positions per latent dimension (its column stride 32 more).
  std::vector<uint16_t> mla_vt_;
  std::vector<int64_t> mla_vt_off_, mla_vt_len_;
  // Sparse attention (c_.dsa): [n_tokens, dsa heads * head_dim] indexer queries,
  // [n_tokens, head_dim] keys, [n_tokens, dsa heads] head weights; per token the sorted
  // positions it attends to, [n_tokens, top_k] with dsa_nsel_ [n_tokens] of them used
  // (-1: all of its causal past, which has no more than top_k positions).
  std::vector<float> dsa_q_, dsa_k_, dsa_w_, dsa_tmp_;  // dsa_tmp_: before the rotation
  std::vector<int32_t> dsa_sel_;
  std::vector<int> dsa_nsel_;
  std::vector<float> dsa_rot_;   // [head_dim, head_dim] the Walsh-Hadamard rotation (F32)
  std::vector<DsaChoice>* dsa_trace_ = nullptr;
  const TensorTrace* tensor_trace_ = nullptr;
  // tensor_trace_'s call for trunk layer il (no call for NextN blocks); il < 0: no suffix.
  void Trace(const char* name, int il, const std::vector<float>& rows, int64_t width);
  std::vector<int64_t> pos_;  // [n_tokens] position of each batch token
  // Attention's split of the batch: tokens for the per-token kernel; sequences (batch
  // index, first batch token) for the tiled one, with the row pointers of the K/V
  // positions each one's chunk sees.
  struct TiledSeq {
    int seq;              // batch index
    int64_t first_token;  // batch index of its first token
  };
  std::vector<int64_t> per_token_;
  std::vector<TiledSeq> tiled_seqs_;
  std::vector<std::vector<const uint8_t*>> tiled_k_rows_, tiled_v_rows_;
  std::vector<int> seq_of_;   // [n_tokens] sequence index of each batch token
  // RoPE angles of each batch token, [n_tokens, rope_dims] (cos half then sin half), for
  // the global and the sliding-window base; filled on first use in each Run.
  std::vector<float> rope_angles_[2];
  bool rope_ready_[2] = {false, false};
};

}  // namespace tandem
