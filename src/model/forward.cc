#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/half.h"

namespace tandem {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Applies fn(row_begin, row_end) over n rows, in parallel when a pool is present.
template <typename Fn>
void ForRows(ThreadPool* pool, int64_t n, int64_t grain, Fn&& fn) {
  if (pool == nullptr) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace

Forward::Forward(const ModelConfig& config, const ModelWeights& weights, ThreadPool* pool)
    : c_(config), w_(weights), pool_(pool), moe_(config, pool) {
  if (c_.dsa.n_heads > 0) InitDsa();
}

int64_t Forward::Embed(const std::vector<ForwardSequence>& batch, const WeightMatrix& table, bool scale) {
  int64_t n = 0;
  for (const ForwardSequence& s : batch) n += s.n_tokens;
  const int64_t E = c_.n_embd;
  Grow(x_, n * E);
  Grow(xn_, n * E);
  Grow(q_, n * c_.q_dim());
  Grow(k_, n * c_.kv_dim());
  Grow(v_, n * c_.v_dim());
  Grow(att_, n * c_.q_dim());
  Grow(proj_, n * E);
  Grow(gate_, n * c_.n_ff);
  Grow(up_, n * c_.n_ff);
  pos_.resize(n);
  seq_of_.resize(n);

  // Token embeddings, scaled (Gemma multiplies by sqrt(n_embd)).
  int64_t t = 0;
  for (size_t si = 0; si < batch.size(); ++si) {
    const ForwardSequence& s = batch[si];
    TANDEM_CHECK(s.start_pos + s.n_tokens <= s.kv->capacity()) << "KV store too small";
    for (int i = 0; i < s.n_tokens; ++i, ++t) {
      TANDEM_CHECK(s.tokens[i] >= 0 && s.tokens[i] < c_.n_vocab) << "token id " << s.tokens[i];
      GetRow(table, s.tokens[i], &x_[t * E]);
      if (scale && c_.embd_scale != 1.0f) Scale(&x_[t * E], c_.embd_scale, E);
      pos_[t] = s.start_pos + i;
      seq_of_[t] = static_cast<int>(si);
    }
  }
  rope_ready_[0] = rope_ready_[1] = false;
  return n;
}

void Forward::Run(const std::vector<ForwardSequence>& batch, std::vector<float>* logits, std::vector<float>* hidden) {
  Embed(batch, w_.tok_embd, true);
  for (int il = 0; il < c_.n_layers; ++il) Block(il, batch);
  LmHead(batch, w_.output_norm, w_.output, logits, hidden);
}

void Forward::RunExpertParallelIdle() {
  if (exchange_ == nullptr) return;
  for (int il = 0; il < c_.n_layers; ++il) {
    if (c_.layer_is_moe(il)) moe_.Run(w_.layers[il].moe, nullptr, 0, nullptr, exchange_);
  }
}

void Forward::RunNextn(int j, const std::vector<ForwardSequence>& batch, const float* h, std::vector<float>* logits,
                       std::vector<float>* hidden) {
  TANDEM_CHECK(j >= 0 && j < static_cast<int>(w_.nextn.size())) << "no NextN block " << j;
  const NextnWeights& nw = w_.nextn[j];
  const int64_t n = Embed(batch, nw.embed_tokens.valid() ? nw.embed_tokens : w_.tok_embd, false);
  const int64_t E = c_.n_embd;
  Grow(eh_, n * 2 * E);
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      RmsNorm(&x_[i * E], nw.enorm.data(), &eh_[i * 2 * E], E, c_.rms_eps);
      RmsNorm(h + i * E, nw.hnorm.data(), &eh_[i * 2 * E + E], E, c_.rms_eps);
    }
  });
  MatMul(nw.eh_proj, eh_.data(), n, x_.data(), pool_);
  Block(c_.n_layers + j, batch);
  LmHead(batch, nw.shared_head_norm.empty() ? w_.output_norm : nw.shared_head_norm,
         nw.shared_head_head.valid() ? nw.shared_head_head : w_.output, logits, hidden);
}

void Forward::Block(int il, const std::vector<ForwardSequence>& batch) {
  const int64_t n = static_cast<int64_t>(pos_.size());
  const int64_t E = c_.n_embd;
  const LayerWeights& l = LayerAt(il);
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      RmsNorm(&x_[i * E], l.attn_norm.data(), &xn_[i * E], E, c_.rms_eps);
  });
  if (c_.mla) {
    MlaAttention(il, batch);  // xn_ -> proj_
  } else {
    MatMul(l.wq, xn_.data(), n, q_.data(), pool_);
    MatMul(l.wk, xn_.data(), n, k_.data(), pool_);
    MatMul(l.wv, xn_.data(), n, v_.data(), pool_);
    Attention(il, batch);
    MatMul(l.wo, att_.data(), n, proj_.data(), pool_);
  }
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c_.post_norms)
        RmsNorm(&proj_[i * E], l.attn_post_norm.data(), &proj_[i * E], E, c_.rms_eps);
      AddInPlace(&x_[i * E], &proj_[i * E], E);
      RmsNorm(&x_[i * E], l.ffn_norm.data(), &xn_[i * E], E, c_.rms_eps);
    }
  });
  if (c_.layer_is_moe(il)) {
    moe_.Run(l.moe, xn_.data(), n, proj_.data(), il < c_.n_layers ? exchange_ : nullptr);
  } else {
    MatMul(l.ffn_gate, xn_.data(), n, gate_.data(), pool_);
    MatMul(l.ffn_up, xn_.data(), n, up_.data(), pool_);
    const int64_t F = c_.n_ff;
    ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (c_.ffn_act == FfnActivation::kGeluTanh) GeluMul(&gate_[i * F], &up_[i * F], F);
        else SiluMul(&gate_[i * F], &up_[i * F], F);
      }
    });
    MatMul(l.ffn_down, gate_.data(), n, proj_.data(), pool_);
  }
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c_.post_norms)
        RmsNorm(&proj_[i * E], l.ffn_post_norm.data(), &proj_[i * E], E, c_.rms_eps);
      AddInPlace(&x_[i * E], &proj_[i * E], E);
    }
  });
}

const std::vector<float>& Forward::RopeAnglesOfBatch(bool swa) {
  // Once per Run for each base: every layer with that base and every head use them.
  const int64_t n = static_cast<int64_t>(pos_.size());
  const int rd = c_.rope_dims, half = rd / 2;
  std::vector<float>& angles = rope_angles_[swa ? 1 : 0];
  if (rope_ready_[swa ? 1 : 0]) return angles;
  const float base = swa ? c_.rope_base_swa : c_.rope_base;
  const RopeYarn& y = c_.yarn;
  const bool plain = y.ext_factor == 0.0f && y.attn_factor == 1.0f;
  Grow(angles, n * rd);
  ForRows(pool_, n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* cos = &angles[i * rd];
      if (plain) {
        RopeAngles(rd, pos_[i], base, c_.rope_scale, cos, cos + half);
      } else {
        RopeAnglesYarn(rd, pos_[i], base, c_.rope_scale, y.ext_factor, y.attn_factor, y.corr_low,
                       y.corr_high, cos, cos + half);
      }
    }
  });
  rope_ready_[swa ? 1 : 0] = true;
  return angles;
}

void Forward::Attention(int il, const std::vector<ForwardSequence>& batch) {
  const LayerWeights& l = LayerAt(il);
  const int64_t n = static_cast<int64_t>(pos_.size());
  const int hd = c_.head_dim, n_heads = c_.n_heads, n_kv = c_.n_kv_heads;
  const bool swa = il < c_.n_layers && c_.layer_is_swa[il];  // NextN blocks attend globally

  const int rd = c_.rope_dims, half = rd / 2;
  const std::vector<float>& angles = RopeAnglesOfBatch(swa);

  // Biases, per-head norms and RoPE on Q and K; then K/V rows into each sequence's store
  // (distinct rows per token, so tokens run in parallel).
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* q = &q_[i * c_.q_dim()];
      float* k = &k_[i * c_.kv_dim()];
      float* v = &v_[i * c_.v_dim()];
      const float* cos = &angles[i * rd];
      const float* sin = cos + half;
      if (c_.qkv_bias) {
        AddInPlace(q, l.bq.data(), c_.q_dim());
        AddInPlace(k, l.bk.data(), c_.kv_dim());
        AddInPlace(v, l.bv.data(), c_.v_dim());
      }
      for (int h = 0; h < n_heads; ++h) {
        if (c_.qk_norm) RmsNorm(q + h * hd, l.q_norm.data(), q + h * hd, hd, c_.rms_eps);
        RopeApply(q + h * hd, rd, cos, sin, c_.rope_neox);
      }
      for (int h = 0; h < n_kv; ++h) {
        if (c_.qk_norm) RmsNorm(k + h * hd, l.k_norm.data(), k + h * hd, hd, c_.rms_eps);
        RopeApply(k + h * hd, rd, cos, sin, c_.rope_neox);
      }
      KvStore* kv = batch[seq_of_[i]].kv;
      Fp32ToFp16Row(k, kv->KeyRow(il, pos_[i]), c_.kv_dim());
      Fp32ToFp16Row(v, kv->ValueRow(il, pos_[i]), c_.v_dim());
    }
  });

  // softmax(q·Kᵀ · scale) · V for every (token, head), causal and windowed. Q and
  // the probabilities are rounded to fp16 to meet the fp16 cache, as llama.cpp does.
  // One task per (token, KV head): the query heads of a GQA group share its K/V rows,
  // which the group kernels read once for all of them. With fewer such pairs than
  // threads (one decoding sequence: gemma3 has one KV head) the group is split so every
  // thread gets heads; the group kernels give each head the one-head kernels' bits, so
  // the split never changes a result.
  const int group = n_heads / n_kv;
  const int64_t pairs = n * n_kv;
  const int threads = pool_ != nullptr ? pool_->num_threads() : 1;
  int heads_per_task = group;
  if (pairs < threads) {
    const int64_t parts = std::min<int64_t>(group, (threads + pairs - 1) / pairs);
    heads_per_task = static_cast<int>((group + parts - 1) / parts);
  }
  const int parts = (group + heads_per_task - 1) / heads_per_task;  // tasks per pair
  ForRows(pool_, pairs * parts, 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scores, qs;
    thread_local std::vector<uint16_t> q16, p16;
    thread_local std::vector<const uint16_t*> k_rows, v_rows;
    thread_local std::vector<const float*> q_heads, p_heads;
    thread_local std::vector<float*> score_heads, out_heads;
    q16.resize(hd);
    qs.resize(static_cast<size_t>(group) * hd);
    for (int64_t task = b; task < e; ++task) {
      // Causal cost grows with the position: tokens are taken as first, last, second,
      // second-to-last, ... so that the pool's contiguous shares get equal work.
      const int64_t k = task / (n_kv * parts);
      const int64_t i = k % 2 == 0 ? k / 2 : n - 1 - k / 2;
      const int kvh = static_cast<int>(task / parts % n_kv);
      const int g0 = static_cast<int>(task % parts) * heads_per_task;
      const int gn = std::min(heads_per_task, group - g0);  // heads g0 .. g0 + gn - 1
      KvStore* kv = batch[seq_of_[i]].kv;
      const int64_t p = pos_[i];
      const int64_t lo = swa ? std::max<int64_t>(0, p - c_.sliding_window + 1) : 0;
      const int64_t len = p - lo + 1;
      k_rows.resize(static_cast<size_t>(len));
      v_rows.resize(static_cast<size_t>(len));
      for (int64_t j = lo; j <= p; ++j) {
        k_rows[j - lo] = kv->KeyRow(il, j) + kvh * hd;
        v_rows[j - lo] = kv->ValueRow(il, j) + kvh * hd;
      }
      scores.resize(static_cast<size_t>(gn) * len);
      p16.resize(static_cast<size_t>(len));
      q_heads.resize(gn);
      p_heads.resize(gn);
      score_heads.resize(gn);
      out_heads.resize(gn);
      for (int g = 0; g < gn; ++g) {
        const int h = kvh * group + g0 + g;
        const float* q = &q_[i * c_.q_dim() + h * hd];
        float* qg = &qs[static_cast<size_t>(g) * hd];
        for (int d = 0; d < hd; ++d) qg[d] = q[d] * c_.q_scale;
        Fp32ToFp16Row(qg, q16.data(), hd);  // q meets the fp16 keys at fp16 precision
        Fp16ToFp32Row(q16.data(), qg, hd);
        q_heads[g] = qg;
        score_heads[g] = &scores[static_cast<size_t>(g) * len];
        p_heads[g] = score_heads[g];
        out_heads[g] = &att_[i * c_.q_dim() + h * hd];
      }
      DotF16RowsGroup(q_heads.data(), gn, k_rows.data(), len, hd, c_.kq_scale, score_heads.data());
      for (int g = 0; g < gn; ++g) {
        float* sg = score_heads[g];
        Softmax(sg, len);
        Fp32ToFp16Row(sg, p16.data(), len);
        Fp16ToFp32Row(p16.data(), sg, len);
      }
      WeightedSumF16RowsGroup(p_heads.data(), gn, v_rows.data(), len, hd, out_heads.data());
    }
  });
}

void Forward::LmHead(const std::vector<ForwardSequence>& batch, const std::vector<float>& norm,
                     const WeightMatrix& head, std::vector<float>* logits, std::vector<float>* hidden) {
  const int64_t E = c_.n_embd;
  if (hidden != nullptr) {
    const int64_t n = static_cast<int64_t>(pos_.size());
    hidden->resize(static_cast<size_t>(n * E));
    ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) RmsNorm(&x_[i * E], norm.data(), hidden->data() + i * E, E, c_.rms_eps);
    });
  }
  // Gather the rows that need logits, normalised.
  std::vector<int64_t> rows;
  int64_t t = 0;
  for (const ForwardSequence& s : batch) {
    if (!s.want_logits) {
      // no row
    } else if (s.all_logits) {
      for (int i = 0; i < s.n_tokens; ++i) rows.push_back(t + i);
    } else if (s.n_tokens > 0) {
      rows.push_back(t + s.n_tokens - 1);
    }
    t += s.n_tokens;
  }
  const int64_t m = static_cast<int64_t>(rows.size());
  for (int64_t r = 0; r < m; ++r) RmsNorm(&x_[rows[r] * E], norm.data(), &xn_[r * E], E, c_.rms_eps);
  logits->resize(static_cast<size_t>(m) * c_.n_vocab);
  MatMul(head, xn_.data(), m, logits->data(), pool_);
  if (c_.final_logit_softcap > 0) {
    const float cap = c_.final_logit_softcap;
    for (float& v : *logits) v = std::tanh(v / cap) * cap;
  }
}

}  // namespace tandem
