#include "model/moe_ffn.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tandem {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Indices [0, n) ordered by descending score, lower index first on ties (ggml's argsort
// in descending order, which llama.cpp's top-k reads the best k of).
void ArgsortDescending(const float* score, int n, std::vector<int>* idx) {
  idx->resize(static_cast<size_t>(n));
  std::iota(idx->begin(), idx->end(), 0);
  std::stable_sort(idx->begin(), idx->end(), [&](int a, int b) { return score[a] > score[b]; });
}

}  // namespace

void RouteTokens(const MoeConfig& m, const float* logits, const float* probs_bias,
                 int64_t n_tokens, int32_t* experts, float* weights) {
  const int n_expert = m.n_expert, k = m.n_expert_used;
  std::vector<float> probs(n_expert), select(n_expert);
  std::vector<int> idx, group_idx;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* lg = logits + t * n_expert;
    if (m.gating == ExpertGating::kSoftmax) {
      std::copy_n(lg, n_expert, probs.data());
      SoftmaxLibm(probs.data(), n_expert);  // exp(x - max) by libm, sum in double, * 1/sum
    } else {
      for (int e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + std::exp(-lg[e]));
    }
    // The selection bias steers which experts are chosen, not their weights.
    for (int e = 0; e < n_expert; ++e) select[e] = probs[e] + (probs_bias != nullptr ? probs_bias[e] : 0.0f);
    if (m.n_groups > 1) {
      // A group's score is the sum of its two best selection scores; experts outside the
      // best n_group_used groups cannot be chosen.
      const int per_group = n_expert / m.n_groups;
      std::vector<float> group_score(m.n_groups);
      for (int g = 0; g < m.n_groups; ++g) {
        ArgsortDescending(&select[g * per_group], per_group, &idx);
        group_score[g] = select[g * per_group + idx[0]] +
                         (per_group > 1 ? select[g * per_group + idx[1]] : 0.0f);
      }
      ArgsortDescending(group_score.data(), m.n_groups, &group_idx);
      std::vector<bool> keep(m.n_groups, false);
      for (int i = 0; i < m.n_group_used; ++i) keep[group_idx[i]] = true;
      for (int e = 0; e < n_expert; ++e) {
        if (!keep[e / per_group]) select[e] = -std::numeric_limits<float>::infinity();
      }
    }
    ArgsortDescending(select.data(), n_expert, &idx);
    int32_t* ex = experts + t * k;
    float* wt = weights + t * k;
    for (int i = 0; i < k; ++i) {
      ex[i] = idx[i];
      wt[i] = probs[idx[i]];
    }
    if (m.norm_weights) {
      double sum = 0;
      for (int i = 0; i < k; ++i) sum += wt[i];
      // llama.cpp clamps the sum to the smallest normal fp16 so it never divides by zero.
      const float s = std::max(static_cast<float>(sum), 6.103515625e-5f);
      for (int i = 0; i < k; ++i) wt[i] /= s;
    }
    if (m.weights_scale != 1.0f) {
      for (int i = 0; i < k; ++i) wt[i] *= m.weights_scale;
    }
  }
}

void MoeFfn::RouteAll(const MoeWeights& w, const float* x, int64_t n) {
  const MoeConfig& m = c_.moe;
  const int64_t pairs = n * m.n_expert_used;
  Grow(logits_, static_cast<size_t>(n * m.n_expert));
  experts_.resize(static_cast<size_t>(pairs));
  weights_.resize(static_cast<size_t>(pairs));
  if (n == 0) return;
  MatMul(w.router, x, n, logits_.data(), pool_);
  RouteTokens(m, logits_.data(), w.probs_bias.empty() ? nullptr : w.probs_bias.data(), n,
              experts_.data(), weights_.data());
}

template <typename ExpertOf>
void MoeFfn::GroupByExpert(int64_t rows, ExpertOf expert_of, int64_t extra_rows) {
  // A counting sort: input order kept within an expert.
  const MoeConfig& m = c_.moe;
  const int64_t E = c_.n_embd, F = m.n_ff_exp;
  expert_begin_.assign(static_cast<size_t>(m.n_expert) + 1, 0);
  for (int64_t r = 0; r < rows; ++r) ++expert_begin_[expert_of(r) + 1];
  for (int e = 0; e < m.n_expert; ++e) expert_begin_[e + 1] += expert_begin_[e];
  order_.resize(static_cast<size_t>(rows));
  row_of_.resize(static_cast<size_t>(rows));
  {
    std::vector<int64_t> next(expert_begin_.begin(), expert_begin_.end() - 1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = next[expert_of(r)]++;
      order_[row] = r;
      row_of_[r] = row;
    }
  }
  active_.clear();
  for (int e = 0; e < m.n_expert; ++e) {
    if (expert_begin_[e + 1] > expert_begin_[e]) active_.push_back(e);
  }
  Grow(yg_, static_cast<size_t>(rows * E));
  Grow(gate_, static_cast<size_t>(std::max(rows * F, extra_rows * m.n_ff_shexp)));
  Grow(up_, static_cast<size_t>(std::max(rows * F, extra_rows * m.n_ff_shexp)));
}

void MoeFfn::PrepareGroupInputs(const MoeWeights& w, const float* x, int64_t n, int64_t rows, bool gather) {
  const int64_t E = c_.n_embd;
  auto prepare = [&](TensorType type, MatMulInput* in) {
    if (gather) {
      tokens_in_.Prepare(type, E, x, n, pool_);
      in->Gather(tokens_in_, token_of_row_.data(), rows);
    } else {
      in->Prepare(type, E, x, rows, pool_);
    }
  };
  prepare(w.gate.all.type, &gate_in_);
  up_takes_gate_in_ = gate_in_.Fits(w.up.all.type, E);
  if (!up_takes_gate_in_) prepare(w.up.all.type, &up_in_);
}

void MoeFfn::RunExperts(const MoeWeights& w) {
  // One GEMM per active expert over exactly its rows. With at least two active experts
  // per thread, whole experts go to threads (taken from a shared counter, so experts
  // with more rows do not hold the others up): one pool loop per layer instead of three
  // per expert. With fewer, each expert's rows are split over the pool. A MatMul's bits
  // do not depend on its pool, so both give the same result.
  const int64_t F = c_.moe.n_ff_exp, E = c_.n_embd;
  auto run_expert = [&](int e, ThreadPool* pool) {
    TANDEM_CHECK(w.gate.Holds(e)) << "expert " << e << " is not held by this rank";
    const int64_t b = expert_begin_[e], cnt = expert_begin_[e + 1] - b;
    MatMul(w.gate.At(e), gate_in_, b, cnt, &gate_[b * F], pool);
    MatMul(w.up.At(e), up_takes_gate_in_ ? gate_in_ : up_in_, b, cnt, &up_[b * F], pool);
    for (int64_t r = b; r < b + cnt; ++r) SiluMul(&gate_[r * F], &up_[r * F], F);
    MatMul(w.down.At(e), &gate_[b * F], cnt, &yg_[b * E], pool);
  };
  const int threads = pool_ != nullptr ? pool_->num_threads() : 1;
  if (threads > 1 && static_cast<int>(active_.size()) >= 2 * threads) {
    std::atomic<size_t> next{0};
    pool_->ParallelFor(threads, 1, [&](int, int64_t, int64_t) {
      for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < active_.size();
           i = next.fetch_add(1, std::memory_order_relaxed)) {
        run_expert(active_[i], nullptr);
      }
    });
  } else {
    for (int e : active_) run_expert(e, pool_);
  }
}

void MoeFfn::Combine(const float* y, const int64_t* row, int64_t n, float* out) {
  // The weighted sum in slot order (best expert first), as llama.cpp adds its views:
  // each product rounded, then added.
  const int64_t E = c_.n_embd, k = c_.moe.n_expert_used;
  auto combine = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * E;
      for (int64_t i = 0; i < k; ++i) {
        const float wt = weights_[t * k + i];
        const float* yr = y + row[t * k + i] * E;
        if (i == 0) {
          for (int64_t d = 0; d < E; ++d) o[d] = yr[d] * wt;
        } else {
          for (int64_t d = 0; d < E; ++d) {
            const float v = yr[d] * wt;
            o[d] += v;
          }
        }
      }
    }
  };
  if (pool_ != nullptr) {
    pool_->ParallelFor(n, 1, [&](int, int64_t b, int64_t e) { combine(b, e); });
  } else {
    combine(0, n);
  }
}

void MoeFfn::AddSharedExpert(const MoeWeights& w, const float* x, int64_t n, float* out) {
  // A dense SwiGLU FFN of every token, added to the routed sum.
  if (!w.shared_gate.valid() || n == 0) return;
  const int64_t E = c_.n_embd, Fs = c_.moe.n_ff_shexp;
  Grow(shared_, static_cast<size_t>(n * E));
  MatMulSameInput({{&w.shared_gate, gate_.data()}, {&w.shared_up, up_.data()}}, x, n, pool_);
  for (int64_t t = 0; t < n; ++t) SiluMul(&gate_[t * Fs], &up_[t * Fs], Fs);
  MatMul(w.shared_down, gate_.data(), n, shared_.data(), pool_);
  for (int64_t t = 0; t < n; ++t) AddInPlace(out + t * E, &shared_[t * E], E);
}

void MoeFfn::Run(const MoeWeights& w, const float* x, int64_t n, float* out, ExpertExchange* exchange) {
  TANDEM_CHECK(w.router.valid() && w.gate.valid() && w.up.valid() && w.down.valid());
  if (exchange != nullptr && exchange->size() > 1) {
    RunSharded(w, x, n, out, exchange);
    return;
  }
  const int64_t k = c_.moe.n_expert_used, pairs = n * k;
  RouteAll(w, x, n);
  // Group the (token, slot) pairs by expert and gather their inputs.
  GroupByExpert(pairs, [&](int64_t p) { return experts_[p]; }, n);
  token_of_row_.resize(static_cast<size_t>(pairs));
  for (int64_t row = 0; row < pairs; ++row) token_of_row_[row] = order_[row] / k;
  PrepareGroupInputs(w, x, n, pairs, /*gather=*/true);
  RunExperts(w);
  Combine(yg_.data(), row_of_.data(), n, out);
  AddSharedExpert(w, x, n, out);
}

void MoeFfn::RunSharded(const MoeWeights& w, const float* x, int64_t n, float* out, ExpertExchange* ex) {
  const MoeConfig& m = c_.moe;
  const int64_t E = c_.n_embd, k = m.n_expert_used, pairs = n * k, W = E + 1;
  const int ranks = ex->size();
  auto fail = [&] {
    if (n > 0) std::fill_n(out, n * E, 0.0f);
  };
  if (!ex->status().ok()) return fail();
  RouteAll(w, x, n);

  // Dispatch: each pair to its expert's owner as [expert id, x row], grouped by
  // destination rank, pair order kept within a rank.
  send_rows_.assign(static_cast<size_t>(ranks), 0);
  recv_rows_.assign(static_cast<size_t>(ranks), 0);
  send_pos_.resize(static_cast<size_t>(pairs));
  std::vector<int64_t> next(static_cast<size_t>(ranks) + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) ++send_rows_[ExpertShard::Owner(experts_[p], m.n_expert, ranks)];
  for (int d = 0; d < ranks; ++d) next[d + 1] = next[d] + send_rows_[d];
  Grow(send_, static_cast<size_t>(pairs * W));
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t pos = next[ExpertShard::Owner(experts_[p], m.n_expert, ranks)]++;
    send_pos_[p] = pos;
    send_[pos * W] = static_cast<float>(experts_[p]);  // exact: ids < 2^24
    std::copy_n(x + p / k * E, E, &send_[pos * W + 1]);
  }
  const auto start = std::chrono::steady_clock::now();
  if (!ex->ExchangeCounts(send_rows_, recv_rows_).ok()) return fail();
  int64_t received = 0;
  for (int64_t r : recv_rows_) received += r;
  Grow(recv_, static_cast<size_t>(received * W));
  if (!ex->ExchangeRows(send_.data(), send_rows_, recv_.data(), recv_rows_, W).ok()) return fail();
  exchange_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // This rank's experts over every row it received, grouped by expert.
  GroupByExpert(received, [&](int64_t r) { return static_cast<int>(recv_[r * W]); }, n);
  Grow(xg_, static_cast<size_t>(received * E));
  for (int64_t row = 0; row < received; ++row) std::copy_n(&recv_[order_[row] * W + 1], E, &xg_[row * E]);
  PrepareGroupInputs(w, xg_.data(), received, received, /*gather=*/false);
  RunExperts(w);
  Grow(back_, static_cast<size_t>(received * E));
  for (int64_t r = 0; r < received; ++r) std::copy_n(&yg_[row_of_[r] * E], E, &back_[r * E]);

  // Combine: the outputs come back in the order their pairs were sent.
  const auto start2 = std::chrono::steady_clock::now();
  Grow(returned_, static_cast<size_t>(pairs * E));
  if (!ex->ExchangeRows(back_.data(), recv_rows_, returned_.data(), send_rows_, E).ok()) return fail();
  exchange_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start2).count();
  for (int d = 0; d < ranks; ++d) {
    if (d != ex->rank()) exchange_bytes_sent_ += (send_rows_[d] * W + recv_rows_[d] * E) * 4;
  }
  if (n == 0) return;
  Combine(returned_.data(), send_pos_.data(), n, out);
  AddSharedExpert(w, x, n, out);
}

}  // namespace tandem
