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

class GgufFile;

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  WeightMatrix wq, wk, wv, wo;        // [q_dim, n_embd], [kv_dim, n_embd], [v_dim, n_embd], [n_embd, q_dim]
  std::vector<float> bq, bk, bv;      // biases (qwen2) or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] (qk_norm) or empty
  std::vector<float> attn_post_norm;  // [n_embd] (post_norms) or empty
  std::vector<float> ffn_norm;        // [n_embd]
  WeightMatrix ffn_gate, ffn_up;      // [n_ff, n_embd]
  WeightMatrix ffn_down;              // [n_embd, n_ff]
  std::vector<float> ffn_post_norm;   // [n_embd] (post_norms) or empty
};

struct ModelWeights {
  WeightMatrix tok_embd;              // [n_vocab, n_embd]
  std::vector<float> output_norm;     // [n_embd]
  WeightMatrix output;                // [n_vocab, n_embd] (== tok_embd when tied)
  std::vector<LayerWeights> layers;   // [n_layers]
};

// Each matrix entry of `w` with its GGUF tensor name: token_embd.weight, output.weight,
// then blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight. In a
// tied model output.weight is an entry of its own with token_embd.weight's data. The
// pointers borrow from *w.
struct NamedMatrix {
  std::string name;
  WeightMatrix* matrix;
};
std::vector<NamedMatrix> ListMatrices(ModelWeights* w);

// Binds every tensor the config needs; NotFound lists all missing tensors, and
// InvalidArgument names a tensor whose shape differs from the config.
StatusOr<ModelWeights> BindWeights(const GgufFile& file, const ModelConfig& config);

}  // namespace tandem
