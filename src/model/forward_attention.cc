// Forward::Attention: dense causal attention with GQA and sliding windows (gemma3,
// llama, qwen*), over each sequence's KvStore rows (fp16, or the store's KvDtype).
//
//   q, k      = rope(norm(q)), rope(norm(k)) per head; k and v rows into the store
//   o_h       = softmax(kq_scale · fp16(q_scale · q_h) · K_j) · V_j over j in [lo, p]
//
// Two kernels compute o_h, with the same bits (tested):
//   - per token (decode, chunks under kTiledMinQueries tokens): one task per (token, KV
//     head) reads the token's whole key range.
//   - tiled (longer chunks: prefill): kernels/attention_tiled.h, one task per (query
//     tile, KV head) reads each K/V row once for the whole tile, where the per-token
//     kernel reads it once per token.
// Both round q and the probabilities to fp16 as llama.cpp's non-flash path does.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/attention_tiled.h"
#include "kernels/half.h"
#include "kernels/ops.h"
#include "model/for_rows.h"
#include "model/forward.h"

namespace tandem {
namespace {

// k-th of n tasks taken as first, last, second, second-to-last, ...: over tasks sorted
// by cost, the pool's contiguous equal shares then get equal work.
int64_t Interleaved(int64_t k, int64_t n) { return k % 2 == 0 ? k / 2 : n - 1 - k / 2; }

}  // namespace

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
      EncodeKvRow(kv->dtype(), k, c_.kv_dim(), hd, kv->KeyRow(il, pos_[i]));
      EncodeKvRow(kv->dtype(), v, c_.v_dim(), hd, kv->ValueRow(il, pos_[i]));
    }
  });

  // Long chunks to the tiled kernel, every other token to the per-token one.
  per_token_.clear();
  tiled_seqs_.clear();
  int64_t t = 0;
  for (size_t si = 0; si < batch.size(); ++si) {
    const ForwardSequence& seq = batch[si];
    if (seq.n_tokens >= kTiledMinQueries) {
      tiled_seqs_.push_back({static_cast<int>(si), t});
    } else {
      for (int i = 0; i < seq.n_tokens; ++i) per_token_.push_back(t + i);
    }
    t += seq.n_tokens;
  }
  if (!per_token_.empty()) AttentionPerToken(il, batch, swa);
  if (!tiled_seqs_.empty()) AttentionTiled(il, batch, swa);
}

void Forward::AttentionPerToken(int il, const std::vector<ForwardSequence>& batch, bool swa) {
  const int hd = c_.head_dim, n_heads = c_.n_heads, n_kv = c_.n_kv_heads;
  const int64_t n = static_cast<int64_t>(per_token_.size());
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
    thread_local std::vector<const uint8_t*> k_rows, v_rows;
    thread_local std::vector<const float*> q_heads, p_heads;
    thread_local std::vector<float*> score_heads, out_heads;
    q16.resize(hd);
    qs.resize(static_cast<size_t>(group) * hd);
    for (int64_t task = b; task < e; ++task) {
      // Causal cost grows with the position: tokens in interleaved order.
      const int64_t i = per_token_[Interleaved(task / (n_kv * parts), n)];
      const int kvh = static_cast<int>(task / parts % n_kv);
      const int g0 = static_cast<int>(task % parts) * heads_per_task;
      const int gn = std::min(heads_per_task, group - g0);  // heads g0 .. g0 + gn - 1
      KvStore* kv = batch[seq_of_[i]].kv;
      const KvDtype dtype = kv->dtype();
      const int64_t head_bytes = KvHeadBytes(dtype, hd);
      const int64_t p = pos_[i];
      const int64_t lo = swa ? std::max<int64_t>(0, p - c_.sliding_window + 1) : 0;
      const int64_t len = p - lo + 1;
      k_rows.resize(static_cast<size_t>(len));
      v_rows.resize(static_cast<size_t>(len));
      for (int64_t j = lo; j <= p; ++j) {
        k_rows[j - lo] = kv->KeyRow(il, j) + kvh * head_bytes;
        v_rows[j - lo] = kv->ValueRow(il, j) + kvh * head_bytes;
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
      DotKvRowsGroup(dtype, q_heads.data(), gn, k_rows.data(), len, hd, c_.kq_scale,
                     score_heads.data());
      for (int g = 0; g < gn; ++g) {
        float* sg = score_heads[g];
        Softmax(sg, len);
        Fp32ToFp16Row(sg, p16.data(), len);
        Fp16ToFp32Row(p16.data(), sg, len);
      }
      WeightedSumKvRowsGroup(dtype, p_heads.data(), gn, v_rows.data(), len, hd, out_heads.data());
    }
  });
}

void Forward::AttentionTiled(int il, const std::vector<ForwardSequence>& batch, bool swa) {
  const int hd = c_.head_dim, n_kv = c_.n_kv_heads, group = c_.n_heads / c_.n_kv_heads;
  const int64_t q_dim = c_.q_dim();
  const int threads = pool_ != nullptr ? pool_->num_threads() : 1;
  const size_t n_seqs = tiled_seqs_.size();
  if (tiled_k_rows_.size() < n_seqs) {
    tiled_k_rows_.resize(n_seqs);
    tiled_v_rows_.resize(n_seqs);
  }
  std::vector<TiledAttentionProblem> problems(n_seqs);
  struct Task {
    int seq;  // index into tiled_seqs_ / problems
    int kvh;
    int64_t q0, q1;  // query rows of the chunk
    int64_t cost;    // keys read, summed over the rows
  };
  std::vector<Task> tasks;
  for (size_t s = 0; s < n_seqs; ++s) {
    const ForwardSequence& seq = batch[tiled_seqs_[s].seq];
    const int64_t t0 = tiled_seqs_[s].first_token;
    TiledAttentionProblem& p = problems[s];
    p.q = &q_[t0 * q_dim];
    p.q_stride = q_dim;
    p.out = &att_[t0 * q_dim];
    p.out_stride = q_dim;
    p.n_q = seq.n_tokens;
    p.pos0 = seq.start_pos;
    p.window = swa ? c_.sliding_window : 0;
    p.row0 = swa ? std::max<int64_t>(0, p.pos0 - c_.sliding_window + 1) : 0;
    p.n_heads = c_.n_heads;
    p.n_kv_heads = n_kv;
    p.head_dim = hd;
    p.scale = c_.kq_scale;
    p.kv_dtype = seq.kv->dtype();
    // Row pointers of every key the chunk sees (the store may be paged).
    std::vector<const uint8_t*>& kr = tiled_k_rows_[s];
    std::vector<const uint8_t*>& vr = tiled_v_rows_[s];
    const int64_t rows = p.pos0 + p.n_q - p.row0;
    kr.resize(static_cast<size_t>(rows));
    vr.resize(static_cast<size_t>(rows));
    for (int64_t j = 0; j < rows; ++j) {
      kr[j] = seq.kv->KeyRow(il, p.row0 + j);
      vr[j] = seq.kv->ValueRow(il, p.row0 + j);
    }
    p.k_rows = kr.data();
    p.v_rows = vr.data();
    const int64_t tile = TiledAttentionQueryTile(p.n_q, n_kv, threads);
    for (int64_t q0 = 0; q0 < p.n_q; q0 += tile) {
      const int64_t q1 = std::min(p.n_q, q0 + tile);
      const int64_t cost = TiledAttentionCost(p, q0, q1);
      for (int kvh = 0; kvh < n_kv; ++kvh)
        tasks.push_back({static_cast<int>(s), kvh, q0, q1, cost});
    }
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const Task& a, const Task& b) { return a.cost < b.cost; });
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  ForRows(pool_, n_tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const Task& task = tasks[Interleaved(k, n_tasks)];
      const TiledAttentionProblem& p = problems[task.seq];
      // This task's query heads, scaled and rounded to fp16 in place (q_ is not read
      // again in this layer): q meets the fp16 keys at fp16 precision, as per token.
      thread_local std::vector<uint16_t> q16;
      q16.resize(static_cast<size_t>(group) * hd);
      for (int64_t r = task.q0; r < task.q1; ++r) {
        const int64_t t = tiled_seqs_[task.seq].first_token + r;
        float* q = &q_[t * q_dim + static_cast<int64_t>(task.kvh) * group * hd];
        for (int d = 0; d < group * hd; ++d) q[d] *= c_.q_scale;
        Fp32ToFp16Row(q, q16.data(), group * hd);
        Fp16ToFp32Row(q16.data(), q, group * hd);
      }
      TiledAttention(p, task.q0, task.q1, task.kvh);
    }
  });
}

}  // namespace tandem
