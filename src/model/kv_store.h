// KvStore: where one sequence's attention keys and values live, as the forward pass
// sees them. Rows are addressed by (layer, position); a K row holds one token's keys of
// every KV head (kv_dim values), a V row its values (v_dim values), each in the store's
// KvDtype (kernels/kv_dtype.h: fp16 by default, as llama.cpp stores them, so results
// agree with it; bf16 or fp8 with --kv-cache-dtype). Rows are bytes: key_row_bytes /
// value_row_bytes each (KvRowBytes of the dtype).
//
// ContiguousKvStore is the simple implementation (one [max_tokens, row bytes] array per
// layer) used by `tandem generate` / `tandem perplexity`; the serving engine supplies
// a paged implementation over its block pool.
// Thread safety: KeyRow/ValueRow only look rows up (no mutation), so the forward pass
// writes distinct rows from several threads at once, and reads rows from several
// threads after all writes of the step are done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/logging.h"
#include "kernels/kv_dtype.h"

namespace tandem {

class KvStore {
 public:
  explicit KvStore(KvDtype dtype = KvDtype::kF16) : dtype_(dtype) {}
  virtual ~KvStore() = default;
  // Preconditions: 0 <= layer < n_layers, 0 <= pos < capacity().
  virtual uint8_t* KeyRow(int layer, int64_t pos) = 0;    // key row bytes
  virtual uint8_t* ValueRow(int layer, int64_t pos) = 0;  // value row bytes
  virtual int64_t capacity() const = 0;                 // positions that fit
  KvDtype dtype() const { return dtype_; }
  // The key row as fp16 values, for the attention variants that only run on an f16
  // cache (MLA, the sparse-attention indexer). Precondition: dtype() == kF16.
  uint16_t* KeyRowF16(int layer, int64_t pos) {
    TANDEM_CHECK(dtype_ == KvDtype::kF16)
        << "an fp16-only attention over a " << KvDtypeName(dtype_) << " cache";
    return reinterpret_cast<uint16_t*>(KeyRow(layer, pos));
  }

 private:
  KvDtype dtype_;
};

class ContiguousKvStore final : public KvStore {
 public:
  // fp16 rows of kv_dim / v_dim values.
  ContiguousKvStore(int n_layers, int64_t max_tokens, int kv_dim, int v_dim)
      : ContiguousKvStore(n_layers, max_tokens, 2 * static_cast<int64_t>(kv_dim),
                          2 * static_cast<int64_t>(v_dim), KvDtype::kF16) {}
  // Rows of the given sizes in bytes (KvRowBytes) holding `dtype`.
  ContiguousKvStore(int n_layers, int64_t max_tokens, int64_t key_row_bytes,
                    int64_t value_row_bytes, KvDtype dtype)
      : KvStore(dtype),
        max_tokens_(max_tokens),
        key_row_bytes_(key_row_bytes),
        value_row_bytes_(value_row_bytes),
        keys_(static_cast<size_t>(n_layers * max_tokens * key_row_bytes)),
        values_(static_cast<size_t>(n_layers * max_tokens * value_row_bytes)) {}

  uint8_t* KeyRow(int layer, int64_t pos) override {
    return keys_.data() + (static_cast<size_t>(layer) * max_tokens_ + pos) * key_row_bytes_;
  }
  uint8_t* ValueRow(int layer, int64_t pos) override {
    return values_.data() + (static_cast<size_t>(layer) * max_tokens_ + pos) * value_row_bytes_;
  }
  int64_t capacity() const override { return max_tokens_; }

 private:
  int64_t max_tokens_;
  int64_t key_row_bytes_;
  int64_t value_row_bytes_;
  std::vector<uint8_t> keys_;    // [n_layers, max_tokens, key_row_bytes]
  std::vector<uint8_t> values_;  // [n_layers, max_tokens, value_row_bytes]
};

}  // namespace tandem
