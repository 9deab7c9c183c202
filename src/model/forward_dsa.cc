// Forward::DsaSelect: DeepSeek sparse attention's lightning indexer (deepseek32,
// glm-dsa), as llama.cpp's graphs and ggml's fused CPU op compute it (see DsaConfig):
//
//   iq       = rot · rope(indexer.attn_q_b · qr)      [n_heads, head_dim]  (qr: normed q_a)
//   ik       = rot · rope(layernorm(indexer.attn_k · x))  [head_dim] -> fp16 in the K row
//              (LayerNorm's epsilon: DsaConfig::k_norm_eps)
//   w        = indexer.proj · x / sqrt(head_dim · n_heads)           [n_heads]
//   score(j) = sum_h relu(iq_h · ik_j) · w_h   over the causal past j <= pos
//   keep     = the top_k positions by score (all of them while pos < top_k)
//
// RoPE on the first rope_dims of each head, with the layer's own angles, is the NEOX
// kind (pairs i, i + rope/2) for deepseek32 and the "normal" (adjacent-pair) kind for
// glm-dsa (DsaConfig::rope_neox); rot is the orthonormal Walsh-Hadamard matrix. MlaAttention
// then masks every other position out of each head's softmax, so the arithmetic over
// the kept ones is the dense path's.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "common/thread_pool.h"
#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/for_rows.h"
#include "model/forward.h"

namespace tandem {
namespace {

constexpr int kMaxIndexerDim = 1024;  // DsaConfig::head_dim's bound (checked at load)

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

void Forward::InitDsa() {
  // Sylvester's construction scaled by 1/sqrt(n), as llama.cpp's ggml_gen_hadamard:
  // H[i][j] = (-1)^popcount(i & j) / sqrt(n).
  const int n = c_.dsa.head_dim;
  const float v = 1.0f / std::sqrt(static_cast<float>(n));
  dsa_rot_.resize(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      dsa_rot_[static_cast<size_t>(i) * n + j] = std::popcount(static_cast<unsigned>(i & j)) % 2 ? -v : v;
    }
  }
}

void Forward::DsaSelect(int il, const std::vector<ForwardSequence>& batch) {
  const DsaConfig& d = c_.dsa;
  const int64_t n = static_cast<int64_t>(pos_.size());
  dsa_nsel_.resize(static_cast<size_t>(n));
  dsa_sel_.resize(static_cast<size_t>(n * d.top_k));
  if (!d.layer_full[il]) return;  // a shared layer: the last full layer's choice stands

  const DsaWeights& w = w_.layers[il].dsa;
  const int H = d.n_heads, D = d.head_dim, rope = c_.rope_dims, half = rope / 2;
  const int kw = c_.mla_dims.kv_lora_rank + c_.mla_dims.qk_rope_dim;  // the indexer key's offset in a K row
  Grow(dsa_q_, static_cast<size_t>(n * H * D));
  Grow(dsa_k_, static_cast<size_t>(n * D));
  Grow(dsa_w_, static_cast<size_t>(n * H));
  Grow(dsa_tmp_, static_cast<size_t>(n * H * D));

  // Projections: queries from the normed q_a, the key and head weights from the layer input.
  MatMul(w.q_b, mla_qa_.data(), n, dsa_tmp_.data(), pool_);
  MatMul(w.k, xn_.data(), n, dsa_k_.data(), pool_);
  // (An F32 proj goes through MatMul's ggml_vec_dot_f32 order: llama.cpp's for one token.)
  MatMul(w.proj, xn_.data(), n, dsa_w_.data(), pool_);
  const std::vector<float>& angles = RopeAnglesOfBatch(false);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(D * H));
  ForEachRow(pool_, n, [&](int64_t i) {
    const float* cos = &angles[i * rope];
    const float* sin = cos + half;
    for (int h = 0; h < H; ++h) RopeApply(&dsa_tmp_[(i * H + h) * D], rope, cos, sin, d.rope_neox);
    float* k = &dsa_k_[i * D];
    LayerNorm(k, w.k_norm.data(), w.k_norm_b.data(), k, D, d.k_norm_eps);  // llama.cpp's f_norm_eps
    RopeApply(k, rope, cos, sin, d.rope_neox);
    for (int h = 0; h < H; ++h) dsa_w_[i * H + h] *= w_scale;
  });
  // The Hadamard rotation of every query head and key, in the orders ggml's matrix
  // product takes: a token's query heads are several columns (tinyBLAS), its key one
  // (ggml_vec_dot_f32). The rotated key goes into the token's K row.
  ForEachRow(pool_, n, [&](int64_t i) {
    float k[kMaxIndexerDim];
    for (int h = 0; h < H; ++h) {
      const float* q = &dsa_tmp_[(i * H + h) * D];
      float* out = &dsa_q_[(i * H + h) * D];
      for (int r = 0; r < D; ++r) out[r] = DotF32Sgemm(&dsa_rot_[static_cast<size_t>(r) * D], q, D);
    }
    for (int r = 0; r < D; ++r) k[r] = DotF32Ggml(&dsa_rot_[static_cast<size_t>(r) * D], &dsa_k_[i * D], D);
    Fp32ToFp16Row(k, batch[seq_of_[i]].kv->KeyRowF16(il, pos_[i]) + kw, D);
  });

  // Scores over each token's causal past (every key of the batch is stored by now) and
  // the top_k of them, chosen as ggml's CPU top_k chooses (std::partial_sort of the
  // positions in order, by score alone): equal scores, which happen where every head's
  // ReLU is 0, fall as the heap selection leaves them, so a tie at the cut keeps the
  // position llama.cpp keeps (its cache cells are positions in order for one sequence;
  // the masked cells after them score -inf and never enter the heap).
  ForEachRow(pool_, n, [&](int64_t t) {
    // Causal cost grows with the position: alternate first and last tokens.
    const int64_t i = t % 2 == 0 ? t / 2 : n - 1 - t / 2;
    const int64_t len = pos_[i] + 1;
    if (len <= d.top_k) {
      dsa_nsel_[i] = -1;
      return;
    }
    thread_local std::vector<const uint16_t*> rows;
    thread_local std::vector<float> scores;
    thread_local std::vector<int32_t> order;
    KvStore* store = batch[seq_of_[i]].kv;
    rows.resize(static_cast<size_t>(len));
    scores.resize(static_cast<size_t>(len));
    order.resize(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) rows[j] = store->KeyRowF16(il, j) + kw;
    IndexerScoresF16(&dsa_q_[i * H * D], &dsa_w_[i * H], H, rows.data(), len, D, scores.data());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + d.top_k, order.end(),
                      [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
    int32_t* sel = &dsa_sel_[i * d.top_k];
    std::copy_n(order.begin(), d.top_k, sel);
    std::sort(sel, sel + d.top_k);
    dsa_nsel_[i] = d.top_k;
  });
  if (dsa_trace_ != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      if (dsa_nsel_[i] < 0) continue;
      const int32_t* sel = &dsa_sel_[i * d.top_k];
      dsa_trace_->push_back({il, pos_[i], std::vector<int32_t>(sel, sel + dsa_nsel_[i])});
    }
  }
}

}  // namespace tandem
