// ModelWeights: views of one model's tensors inside the mmapped GGUF file.
//
// Matrices stay in the file's (quantized) format and are read in place; the small
// vectors (norm weights, biases) are converted to float32 copies at load.
// Ownership: matrices borrow from the GgufFile, which must outlive the weights.
// Thread safety: immutable after BindWeights.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/matmul.h"
#include "model/model_config.h"

namespace tandem {

class ModelSource;

// A 3-D tensor of `count` matrices [rows_each, cols] (GGUF dims {cols, rows_each,
// count}, the matrix index outermost): a MoE layer's experts, or MLA's per-head
// attn_k_b / attn_v_b. `all` views it as [count * rows_each, cols], so load-time
// rewrites treat it as one matrix, and At(i) is matrix i's slice of it (no copy).
// With expert parallelism a layer's expert stacks hold only this rank's experts
// [first, first + count) (NarrowTo); At takes the global index. A kI8Rows stack's
// all.i8 points to `count` Int8RowParams, one per matrix.
struct MatrixStack {
  WeightMatrix all;
  int count = 0;
  int64_t rows_each = 0;
  int first = 0;  // global index of the first matrix held

  bool valid() const { return all.valid(); }
  bool Holds(int i) const { return i >= first && i < first + count; }
  WeightMatrix At(int i) const {
    WeightMatrix m = all;
    m.data = all.data + static_cast<int64_t>(i - first) * rows_each * all.row_bytes;
    m.rows = rows_each;
    if (all.i8 != nullptr) m.i8 = all.i8 + (i - first);
    return m;
  }
  // Keeps matrices [begin, begin + n) of those held; the others are never read again
  // (their mapped pages stay untouched).
  void NarrowTo(int begin, int n) {
    all.data += static_cast<int64_t>(begin - first) * rows_each * all.row_bytes;
    if (all.i8 != nullptr) all.i8 += begin - first;
    all.rows = static_cast<int64_t>(n) * rows_each;
    first = begin;
    count = n;
  }
};

// The MoE FFN of one layer (ModelConfig::layer_is_moe).
struct MoeWeights {
  WeightMatrix router;                // ffn_gate_inp [n_expert, n_embd]
  std::vector<float> probs_bias;      // exp_probs_b [n_expert] (moe.probs_bias) or empty
  MatrixStack gate, up;              // ffn_{gate,up}_exps [n_expert][n_ff_exp, n_embd]
  MatrixStack down;                  // ffn_down_exps [n_expert][n_embd, n_ff_exp]
  WeightMatrix shared_gate, shared_up;  // ffn_{gate,up}_shexp [n_ff_shexp, n_embd] or invalid
  WeightMatrix shared_down;             // ffn_down_shexp [n_embd, n_ff_shexp] or invalid
};

// A NextN (multi-token prediction) block's own tensors, beside its LayerWeights.
struct NextnWeights {
  WeightMatrix eh_proj;               // [n_embd, 2 * n_embd]: concat(enorm(embd), hnorm(h)) -> n_embd
  std::vector<float> enorm, hnorm;    // [n_embd]
  WeightMatrix embed_tokens;          // [n_vocab, n_embd] or invalid (then token_embd)
  WeightMatrix shared_head_head;      // [n_vocab, n_embd] or invalid (then output)
  std::vector<float> shared_head_norm;  // [n_embd] or empty (then output_norm)
};

// The MLA attention of one layer (ModelConfig::mla; see MlaConfig).
struct MlaWeights {
  WeightMatrix q_a;                   // attn_q_a [q_lora_rank, n_embd] (q_lora_rank > 0)
  std::vector<float> q_a_norm;        // attn_q_a_norm [q_lora_rank]
  WeightMatrix q_b;                   // attn_q_b [n_head * (nope + rope), q_lora_rank]
  WeightMatrix kv_a;                  // attn_kv_a_mqa [kv_lora_rank + rope, n_embd]
  std::vector<float> kv_a_norm;       // attn_kv_a_norm [kv_lora_rank]
  MatrixStack k_b;                    // attn_k_b [n_head][kv_lora_rank, nope]: absorbs q_nope
  MatrixStack v_b;                    // attn_v_b [n_head][v_head_dim, kv_lora_rank]: latent -> value
  WeightMatrix kv_b;                  // attn_kv_b [n_head * (nope + v_head_dim), kv_lora_rank] in
                                      // older files (MlaConfig::joint_kv_b), until split into k_b / v_b
};

// The lightning indexer of one deepseek32 / glm-dsa layer (DsaConfig; bound for layers
// with dsa.layer_full only, and deepseek32's NextN blocks, where it is not run).
struct DsaWeights {
  WeightMatrix q_b;                   // indexer.attn_q_b [n_heads * head_dim, q_lora_rank]
  WeightMatrix k;                     // indexer.attn_k [head_dim, n_embd]
  std::vector<float> k_norm, k_norm_b;  // indexer.k_norm weight, bias [head_dim] (LayerNorm)
  WeightMatrix proj;                  // indexer.proj [n_heads, n_embd]: per-head score weights

  bool valid() const { return q_b.valid(); }
};

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  WeightMatrix wq, wk, wv, wo;        // [q_dim, n_embd], [kv_dim, n_embd], [v_dim, n_embd], [n_embd, q_dim]
                                      // (MLA: wq [n_head * (nope + rope), n_embd] when there is
                                      // no q_lora, no wk/wv, wo [n_embd, n_head * v_head_dim])
  MlaWeights mla;                     // MLA layers
  DsaWeights dsa;                     // sparse-attention layers with their own indexer
  std::vector<float> bq, bk, bv;      // biases (qwen2) or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] (qk_norm) or empty
  std::vector<float> attn_post_norm;  // [n_embd] (post_norms) or empty
  std::vector<float> ffn_norm;        // [n_embd]
  WeightMatrix ffn_gate, ffn_up;      // [n_ff, n_embd] (dense layers)
  WeightMatrix ffn_down;              // [n_embd, n_ff] (dense layers)
  MoeWeights moe;                     // MoE layers
  std::vector<float> ffn_post_norm;   // [n_embd] (post_norms) or empty
};

struct ModelWeights {
  WeightMatrix tok_embd;              // [n_vocab, n_embd]
  std::vector<float> output_norm;     // [n_embd]
  WeightMatrix output;                // [n_vocab, n_embd] (== tok_embd when tied)
  std::vector<LayerWeights> layers;   // [n_layers]
  // NextN blocks (config.n_nextn_layers), GGUF blocks n_layers.. : their attention and
  // MoE weights in `layers` of their own, loaded for speculative decoding, not run by
  // the main forward pass.
  std::vector<LayerWeights> nextn_layers;
  std::vector<NextnWeights> nextn;
};

// Each matrix entry of `w` with its GGUF tensor name: token_embd.weight, output.weight,
// then blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight and the
// MoE matrices (ffn_gate_inp, ffn_{gate,up,down}_exps as whole tensors, *_shexp), the
// NextN blocks' too. Invalid (absent) entries are listed as well. In a
// tied model output.weight is an entry of its own with token_embd.weight's data. The
// pointers borrow from *w.
struct NamedMatrix {
  std::string name;
  WeightMatrix* matrix;
};
std::vector<NamedMatrix> ListMatrices(ModelWeights* w);

// Binds every tensor the config needs; NotFound lists all missing tensors, and
// InvalidArgument names a tensor whose shape differs from the config.
StatusOr<ModelWeights> BindWeights(const ModelSource& file, const ModelConfig& config);

// For MlaConfig::joint_kv_b: builds each layer's k_b (the K rows of attn_kv_b, transposed
// per head) and v_b (its V rows) as Q8_0 matrices in *storage (allocated once; the stacks
// point into it), from attn_kv_b's dequantized values. Precondition: weights bound with
// config.
void SplitMlaKvB(const ModelConfig& config, ModelWeights* weights, std::vector<uint8_t>* storage);

}  // namespace tandem
