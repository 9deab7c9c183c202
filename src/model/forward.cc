#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/half.h"
#include "model/for_rows.h"

namespace tandem {
namespace {

void Grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
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
  std::vector<float> traced_hidden;
  if (tensor_trace_ != nullptr && hidden == nullptr) hidden = &traced_hidden;
  LmHead(batch, w_.output_norm, w_.output, logits, hidden);
  if (tensor_trace_ != nullptr) {
    Trace("result_norm", -1, *hidden, c_.n_embd);
    Trace("result_output", -1, *logits, c_.n_vocab);
  }
}

void Forward::Trace(const char* name, int il, const std::vector<float>& rows, int64_t width) {
  if (tensor_trace_ == nullptr || il >= c_.n_layers) return;
  const int64_t n = il >= 0 ? static_cast<int64_t>(pos_.size()) : static_cast<int64_t>(rows.size()) / width;
  (*tensor_trace_)(il >= 0 ? std::string(name) + "-" + std::to_string(il) : std::string(name), rows.data(), n,
                   width);
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
  Trace("attn_norm", il, xn_, E);
  if (c_.mla) {
    MlaAttention(il, batch);  // xn_ -> proj_
  } else {
    MatMulSameInput({{&l.wq, q_.data()}, {&l.wk, k_.data()}, {&l.wv, v_.data()}}, xn_.data(), n, pool_);
    Attention(il, batch);
    Trace("kqv_out", il, att_, c_.q_dim());
    MatMul(l.wo, att_.data(), n, proj_.data(), pool_);
  }
  Trace("attn_out", il, proj_, E);
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c_.post_norms)
        RmsNorm(&proj_[i * E], l.attn_post_norm.data(), &proj_[i * E], E, c_.rms_eps);
      AddInPlace(&x_[i * E], &proj_[i * E], E);
      RmsNorm(&x_[i * E], l.ffn_norm.data(), &xn_[i * E], E, c_.rms_eps);
    }
  });
  Trace("ffn_inp", il, x_, E);
  Trace("ffn_norm", il, xn_, E);
  if (c_.layer_is_moe(il)) {
    moe_.Run(l.moe, xn_.data(), n, proj_.data(), il < c_.n_layers ? exchange_ : nullptr);
  } else {
    MatMulSameInput({{&l.ffn_gate, gate_.data()}, {&l.ffn_up, up_.data()}}, xn_.data(), n, pool_);
    const int64_t F = c_.n_ff;
    ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (c_.ffn_act == FfnActivation::kGeluTanh) GeluMul(&gate_[i * F], &up_[i * F], F);
        else SiluMul(&gate_[i * F], &up_[i * F], F);
      }
    });
    MatMul(l.ffn_down, gate_.data(), n, proj_.data(), pool_);
  }
  Trace("ffn_out", il, proj_, E);
  ForRows(pool_, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c_.post_norms)
        RmsNorm(&proj_[i * E], l.ffn_post_norm.data(), &proj_[i * E], E, c_.rms_eps);
      AddInPlace(&x_[i * E], &proj_[i * E], E);
    }
  });
  Trace("l_out", il, x_, E);
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
      if (!c_.rope_freq_factors.empty() && !swa) {
        RopeAnglesFactors(rd, pos_[i], base, c_.rope_scale, c_.rope_freq_factors.data(), cos, cos + half);
      } else if (plain) {
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
