// KvStore: where one sequence's attention keys and values live, as the forward pass
// sees them. Rows are addressed by (layer, position); each K row holds kv_dim fp16
// values (all KV heads of that token), each V row v_dim fp16 values. fp16 halves the
// cache's memory and is what llama.cpp stores by default, so results agree with it.
//
// ContiguousKvStore is the simple implementation (one [max_tokens, dim] array per
// layer) used by `tandem generate` / `tandem perplexity`; the serving engine supplies
// a paged implementation over its block pool.
// Thread safety: KeyRow/ValueRow only look rows up (no mutation), so the forward pass
// writes distinct rows from several threads at once, and reads rows from several
// threads after all writes of the step are done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // Preconditions: 0 <= layer < n_layers, 0 <= pos < capacity().
  virtual uint16_t* KeyRow(int layer, int64_t pos) = 0;    // [kv_dim] fp16
  virtual uint16_t* ValueRow(int layer, int64_t pos) = 0;  // [v_dim] fp16
  virtual int64_t capacity() const = 0;                 // positions that fit
};

class ContiguousKvStore final : public KvStore {
 public:
  ContiguousKvStore(int n_layers, int64_t max_tokens, int kv_dim, int v_dim)
      : max_tokens_(max_tokens), kv_dim_(kv_dim), v_dim_(v_dim),
        keys_(static_cast<size_t>(n_layers) * max_tokens * kv_dim),
        values_(static_cast<size_t>(n_layers) * max_tokens * v_dim) {}

  uint16_t* KeyRow(int layer, int64_t pos) override {
    return keys_.data() + (static_cast<size_t>(layer) * max_tokens_ + pos) * kv_dim_;
  }
  uint16_t* ValueRow(int layer, int64_t pos) override {
    return values_.data() + (static_cast<size_t>(layer) * max_tokens_ + pos) * v_dim_;
  }
  int64_t capacity() const override { return max_tokens_; }

 private:
  int64_t max_tokens_;
  int kv_dim_;
  int v_dim_;
  std::vector<uint16_t> keys_;    // [n_layers, max_tokens, kv_dim] fp16
  std::vector<uint16_t> values_;  // [n_layers, max_tokens, v_dim] fp16
};

}  // namespace tandem
