// Forward::MlaAttention: multi-head latent attention in its absorbed form, as
// llama.cpp's deepseek2 graph runs it (see MlaConfig in model_config.h):
//
//   q        = q_b · rmsnorm(q_a · x)   (or attn_q · x)        [n_heads, nope | rope]
//   c | k_pe = kv_a · x;  c = rmsnorm(c);  k_pe = rope(k_pe)   [kv_lora | rope]
//   K row    = [c, k_pe] (fp16, the only thing cached per token and layer; glm-dsa
//              appends its indexer key, and masks positions out: forward_dsa.cc)
//   Q_h      = [k_b[h] · q_nope_h, rope(q_pe_h)]               [kv_lora + rope]
//   o_h      = softmax(kq_scale · Q_h · K_j) · c_j over the causal past  [kv_lora]
//   out      = attn_output · concat_h(v_b[h] · o_h)
//
// All heads share one K row per position (MQA over the latent); Q and the probabilities
// meet the fp16 cache at fp16 precision, and the scores and latent sums take
// ggml_vec_dot_f16's order (DotF16RowsGgml, WeightedSumF16ColumnsGgml over the latents
// transposed once per step), as in llama.cpp's attention for one query token (its decode
// path, which Tandem's products follow).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/for_rows.h"
#include "model/forward.h"

namespace tandem {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Per head h and token t: out[t * out_stride + h * out_head_stride ..] (rows_each values)
// = stack.At(h) · in[t * in_stride + h * in_head_stride ..] (cols values). One head per
// task; a MatMul gives each token the same bits whatever the other tokens, so neither
// the batch nor the split changes a result.
void PerHeadMatMul(const MatrixStack& stack, const float* in, int64_t in_stride, int64_t in_head_stride,
                   float* out, int64_t out_stride, int64_t out_head_stride, int64_t n, int n_heads,
                   ThreadPool* pool) {
  const int64_t in_w = stack.all.cols, out_w = stack.rows_each;
  ForEachRow(pool, n_heads, [&](int64_t h) {
    thread_local std::vector<float> x, y;  // [n, in_w], [n, out_w]
    x.resize(static_cast<size_t>(n * in_w));
    y.resize(static_cast<size_t>(n * out_w));
    for (int64_t t = 0; t < n; ++t) std::copy_n(in + t * in_stride + h * in_head_stride, in_w, &x[t * in_w]);
    MatMul(stack.At(static_cast<int>(h)), x.data(), n, y.data(), nullptr);
    for (int64_t t = 0; t < n; ++t) std::copy_n(&y[t * out_w], out_w, out + t * out_stride + h * out_head_stride);
  });
}

}  // namespace

void Forward::MlaAttention(int il, const std::vector<ForwardSequence>& batch) {
  const LayerWeights& l = LayerAt(il);
  const MlaWeights& w = l.mla;
  const MlaConfig& m = c_.mla_dims;
  const int64_t n = static_cast<int64_t>(pos_.size());
  const int H = c_.n_heads, nope = m.qk_nope_dim, rope = m.qk_rope_dim, lora = m.kv_lora_rank;
  const int qh = nope + rope;       // one head's query
  const int kw = lora + rope;       // one K row's attention part (c_.kv_dim() without the indexer key)
  const int vh = m.v_head_dim;

  // Queries and the latent.
  Grow(mla_q_, static_cast<size_t>(n * H * qh));
  Grow(mla_kv_, static_cast<size_t>(n * kw));
  if (m.q_lora_rank > 0) {
    Grow(mla_qa_, static_cast<size_t>(n * m.q_lora_rank));
    MatMulSameInput({{&w.q_a, mla_qa_.data()}, {&w.kv_a, mla_kv_.data()}}, xn_.data(), n, pool_);
    for (int64_t i = 0; i < n; ++i) {
      float* qa = &mla_qa_[i * m.q_lora_rank];
      RmsNorm(qa, w.q_a_norm.data(), qa, m.q_lora_rank, c_.rms_eps);
    }
    MatMul(w.q_b, mla_qa_.data(), n, mla_q_.data(), pool_);
  } else {
    MatMulSameInput({{&l.wq, mla_q_.data()}, {&w.kv_a, mla_kv_.data()}}, xn_.data(), n, pool_);
  }

  // RoPE on q_pe (into the absorbed queries' tails) and k_pe, the latent normed, and the
  // K row into each sequence's store.
  Grow(mla_qabs_, static_cast<size_t>(n * H * kw));
  const std::vector<float>& angles = RopeAnglesOfBatch(false);
  const int half = c_.rope_dims / 2;
  ForEachRow(pool_, n, [&](int64_t i) {
    const float* cos = &angles[i * c_.rope_dims];
    const float* sin = cos + half;
    float* kv = &mla_kv_[i * kw];
    RmsNorm(kv, w.kv_a_norm.data(), kv, lora, c_.rms_eps);
    RopeApply(kv + lora, rope, cos, sin, c_.rope_neox);
    for (int h = 0; h < H; ++h) {
      float* q_pe = &mla_qabs_[(i * H + h) * kw + lora];
      std::copy_n(&mla_q_[(i * H + h) * qh + nope], rope, q_pe);
      RopeApply(q_pe, rope, cos, sin, c_.rope_neox);
    }
    KvStore* store = batch[seq_of_[i]].kv;
    Fp32ToFp16Row(kv, store->KeyRowF16(il, pos_[i]), kw);
  });
  // glm-dsa: which cached positions each token keeps. A NextN block (il >= n_layers, MTP
  // drafts only) attends densely: its indexer is not bound (llama.cpp has no glm-dsa MTP
  // graph to check one against).
  const bool sparse = c_.dsa.n_heads > 0 && il < c_.n_layers;
  if (sparse) DsaSelect(il, batch);

  // Absorbed queries' heads: k_b[h] · q_nope_h.
  PerHeadMatMul(w.k_b, mla_q_.data(), static_cast<int64_t>(H) * qh, qh, mla_qabs_.data(),
                static_cast<int64_t>(H) * kw, kw, n, H, pool_);

  // Each sequence's latents (V) transposed once for all its tokens' tasks, as llama.cpp's
  // kqv reads them: per sequence, lora rows of its longest causal range in this step.
  const size_t n_seqs = batch.size();
  mla_vt_len_.assign(n_seqs, 0);
  for (int64_t i = 0; i < n; ++i) mla_vt_len_[seq_of_[i]] = std::max<int64_t>(mla_vt_len_[seq_of_[i]], pos_[i] + 1);
  // Column stride: the range plus 32 values, so that consecutive columns are not a
  // multiple of 4 KiB apart (the transposition's stores would evict each other's lines).
  auto stride_of = [&](size_t sq) { return mla_vt_len_[sq] + 32; };
  mla_vt_off_.assign(n_seqs + 1, 0);
  for (size_t sq = 0; sq < n_seqs; ++sq) mla_vt_off_[sq + 1] = mla_vt_off_[sq] + lora * stride_of(sq);
  if (mla_vt_.size() < static_cast<size_t>(mla_vt_off_[n_seqs])) mla_vt_.resize(static_cast<size_t>(mla_vt_off_[n_seqs]));
  {
    constexpr int64_t kChunk = 64;  // positions per transposing task
    std::vector<std::pair<size_t, int64_t>> chunks;
    for (size_t sq = 0; sq < n_seqs; ++sq) {
      for (int64_t j0 = 0; j0 < mla_vt_len_[sq]; j0 += kChunk) chunks.emplace_back(sq, j0);
    }
    ForEachRow(pool_, static_cast<int64_t>(chunks.size()), [&](int64_t c) {
      const auto [sq, j0] = chunks[c];
      const int64_t cnt = std::min(kChunk, mla_vt_len_[sq] - j0);
      const uint16_t* rows[kChunk];
      for (int64_t j = 0; j < cnt; ++j) rows[j] = batch[sq].kv->KeyRowF16(il, j0 + j);
      TransposeF16Rows(rows, cnt, lora, &mla_vt_[mla_vt_off_[sq] + j0], stride_of(sq));
    });
  }

  // softmax(kq_scale · Q_h · K) · latent, one task per (token, group of up to 4 heads).
  Grow(mla_lat_, static_cast<size_t>(n * H * lora));
  constexpr int kHeadsPerTask = 4;
  const int parts = (H + kHeadsPerTask - 1) / kHeadsPerTask;
  ForEachRow(pool_, n * parts, [&](int64_t task) {
    thread_local std::vector<float> scores;
    thread_local std::vector<uint16_t> q16, p16;
    thread_local std::vector<float> qs;
    thread_local std::vector<const uint16_t*> rows;
    thread_local std::vector<uint8_t> keep;
    // Causal cost grows with the position: alternate first and last tokens so the
    // pool's contiguous shares get equal work.
    const int64_t k = task / parts;
    const int64_t i = k % 2 == 0 ? k / 2 : n - 1 - k / 2;
    const int h0 = static_cast<int>(task % parts) * kHeadsPerTask;
    const int gn = std::min(kHeadsPerTask, H - h0);
    KvStore* store = batch[seq_of_[i]].kv;
    const int64_t len = pos_[i] + 1;
    rows.resize(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) rows[j] = store->KeyRowF16(il, j);
    q16.resize(kw);
    qs.resize(static_cast<size_t>(gn) * kw);
    scores.resize(static_cast<size_t>(gn) * len);
    p16.resize(static_cast<size_t>(len));
    const float* q_heads[kHeadsPerTask];
    float* score_heads[kHeadsPerTask];
    const float* p_heads[kHeadsPerTask];
    float* out_heads[kHeadsPerTask];
    for (int g = 0; g < gn; ++g) {
      float* qg = &qs[static_cast<size_t>(g) * kw];
      Fp32ToFp16Row(&mla_qabs_[(i * H + h0 + g) * kw], q16.data(), kw);  // q meets the fp16 keys
      Fp16ToFp32Row(q16.data(), qg, kw);
      q_heads[g] = qg;
      score_heads[g] = &scores[static_cast<size_t>(g) * len];
      p_heads[g] = score_heads[g];
      out_heads[g] = &mla_lat_[(i * H + h0 + g) * lora];
    }
    DotF16RowsGgml(q_heads, gn, rows.data(), len, kw, c_.kq_scale, score_heads);
    if (sparse && dsa_nsel_[i] >= 0) {
      // Sparse attention: positions the indexer did not keep are masked out (-inf), as
      // llama.cpp's mask does, so the kept ones meet the dense path's arithmetic.
      keep.assign(static_cast<size_t>(len), 0);
      for (int s = 0; s < dsa_nsel_[i]; ++s) keep[dsa_sel_[i * c_.dsa.top_k + s]] = 1;
      for (int g = 0; g < gn; ++g) {
        for (int64_t j = 0; j < len; ++j) {
          if (!keep[j]) score_heads[g][j] = -INFINITY;
        }
      }
    }
    for (int g = 0; g < gn; ++g) {
      Softmax(score_heads[g], len);
      Fp32ToFp16Row(score_heads[g], p16.data(), len);
      Fp16ToFp32Row(p16.data(), score_heads[g], len);
    }
    // V is the first kv_lora_rank values of each K row (transposed above).
    const size_t sq = seq_of_[i];
    WeightedSumF16ColumnsGgml(p_heads, gn, &mla_vt_[mla_vt_off_[sq]], stride_of(sq), len, lora, out_heads);
  });

  // Each head's latent output through v_b, then attn_output.
  Grow(mla_out_, static_cast<size_t>(n * H * vh));
  PerHeadMatMul(w.v_b, mla_lat_.data(), static_cast<int64_t>(H) * lora, lora, mla_out_.data(),
                static_cast<int64_t>(H) * vh, vh, n, H, pool_);
  Trace("kqv_out", il, mla_out_, static_cast<int64_t>(H) * vh);
  MatMul(l.wo, mla_out_.data(), n, proj_.data(), pool_);
}

}  // namespace tandem
