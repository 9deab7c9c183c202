#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/i8_rows.h"
#include "kernels/int8_tile.h"
#include "kernels/ops.h"
#include "kernels/q0_gemm.h"
#include "kernels/quant_dot.h"
#include "kernels/row_runs.h"

namespace tandem {
namespace {

// Rows dequantized together: the tile [kTileRows, cols] stays in L1/L2 while a block of
// tokens' activations streams past it.
constexpr int64_t kTileRows = 16;

// Tokens per block: the paths below run every weight tile of their rows against one
// block of tokens, then the next block, so a block's activations (about this many
// bytes) stay in L2 for all the tiles. Without blocks a long prompt chunk streamed all
// its activations from DRAM once per 4-row tile (21 MB per tile at 16,384 tokens of 640
// columns). A multiple of 4, so tokens group (in pairs, in fours) as without blocks and
// every output keeps its bits. Re-preparing a tile per block costs a pass over its
// weights per block, small against the block's multiply-adds.
constexpr int64_t kTokenBlockBytes = 192 << 10;

int64_t TokenBlock(int64_t bytes_per_token) {
  return std::max<int64_t>(16, kTokenBlockBytes / std::max<int64_t>(1, bytes_per_token) / 4 * 4);
}

void MatMulRows(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                int64_t r1) {
  // The float types in llama.cpp's decode-path orders (its AVX2 build; one per matrix, so
  // a token's bits never depend on its batch): ggml_vec_dot_bf16 for BF16,
  // ggml_vec_dot_f32 / _f16 (one order) for the others: its mul_mat for one token (and
  // its mul_mat_id, the experts, for any count). From two tokens up a dense matrix goes
  // through tinyBLAS there, whose order (DotF32Sgemm) Tandem leaves to llama.cpp's
  // batched prompts: the token-by-token path is the one Tandem's other products follow
  // (q0_gemm.h, quant_dot.h, the MLA attention).
  float (*const dot)(const float*, const float*, int64_t) = w.type == TensorType::kBF16 ? DotBf16Ggml : DotF32Ggml;
  thread_local std::vector<float> tile;
  const int64_t cols = w.cols;
  const int64_t block = TokenBlock(cols * 4);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t t1 = std::min(n_tokens, t0 + block);
    for (int64_t rb = r0; rb < r1; rb += kTileRows) {
      const int64_t nr = std::min(kTileRows, r1 - rb);
      const float* rows_f32;
      if (w.type == TensorType::kF32) {
        rows_f32 = reinterpret_cast<const float*>(w.data + rb * w.row_bytes);
      } else {
        tile.resize(static_cast<size_t>(kTileRows * cols));
        for (int64_t r = 0; r < nr; ++r) {
          DequantizeRow(w.type, w.data + (rb + r) * w.row_bytes, tile.data() + r * cols, cols);
        }
        rows_f32 = tile.data();
      }
      for (int64_t t = t0; t < t1; ++t) {
        const float* xt = x + t * cols;
        float* yt = y + t * w.rows + rb;
        for (int64_t r = 0; r < nr; ++r) yt[r] = dot(rows_f32 + r * cols, xt, cols);
      }
    }
  }
}

// The W8A8 path: x already quantized to Q8_0 rows of `a_row_bytes` bytes.
void MatMulRowsQ8(const WeightMatrix& w, const uint8_t* xq, int64_t a_row_bytes,
                  const PairedQ8K* paired, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const bool multi = HasMultiTokenDot(w.type);
  const int64_t block = TokenBlock(a_row_bytes);
  if (n_tokens == 1) {  // decode: the rows in interleaved runs (row_runs.h)
    ForEachRowInRuns(1, r0, r1, [&](int64_t r) { y[r] = VecDotQ8(w.type, w.data + r * w.row_bytes, xq, w.cols); });
    return;
  }
  const int64_t n_tiles = (r1 - r0 + kTileRows - 1) / kTileRows;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t t1 = std::min(n_tokens, t0 + block);
    ForEachRowInRuns(t1 - t0, 0, n_tiles, [&](int64_t tile) {  // tiles in interleaved runs (row_runs.h)
      const int64_t rb = r0 + tile * kTileRows;
      const int64_t nr = std::min(kTileRows, r1 - rb);
      int64_t t = t0;
      // avx512, tokens paired once: 8 per call, then the rest (1-7; t is even) in one
      // call of fewer pairs.
      for (; paired != nullptr && t < t1; t += 8) {
        const int n = static_cast<int>(std::min<int64_t>(8, t1 - t));
        for (int64_t r = 0; r < nr; ++r) {
          float out[8];
          VecDotQ8KPaired(w.type, w.data + (rb + r) * w.row_bytes, *paired, static_cast<int>(t / 2), (n + 1) / 2,
                          out);
          for (int k = 0; k < n; ++k) y[(t + k) * w.rows + rb + r] = out[k];
        }
      }
      for (; multi && t + 8 <= t1; t += 8) {
        const void* a[8];
        for (int k = 0; k < 8; ++k) a[k] = xq + (t + k) * a_row_bytes;
        for (int64_t r = 0; r < nr; ++r) {
          float out[8];
          VecDotQ8x8(w.type, w.data + (rb + r) * w.row_bytes, a, w.cols, out);
          for (int k = 0; k < 8; ++k) y[(t + k) * w.rows + rb + r] = out[k];
        }
      }
      for (; multi && t + 4 <= t1; t += 4) {
        const void* a[4] = {xq + t * a_row_bytes, xq + (t + 1) * a_row_bytes,
                            xq + (t + 2) * a_row_bytes, xq + (t + 3) * a_row_bytes};
        for (int64_t r = 0; r < nr; ++r) {
          float out[4];
          VecDotQ8x4(w.type, w.data + (rb + r) * w.row_bytes, a, w.cols, out);
          for (int k = 0; k < 4; ++k) y[(t + k) * w.rows + rb + r] = out[k];
        }
      }
      for (; t < t1; ++t) {
        const uint8_t* at = xq + t * a_row_bytes;
        float* yt = y + t * w.rows + rb;
        for (int64_t r = 0; r < nr; ++r) {
          yt[r] = VecDotQ8(w.type, w.data + (rb + r) * w.row_bytes, at, w.cols);
        }
      }
    });
  }
}

// Prefill path for Q8_0 / Q5_0 / Q4_0 weights and many tokens (see DotInt8Tile4x4 in
// int8_tile.h): each tile of 4 weight rows is decoded once and multiplied with every
// token, 4 rows x 4 tokens per inner call, against activations prepared once per call.
struct TileActivations {
  const int8_t* q;
  const float* d_lanes;
  const int32_t* corr;
  int64_t cols;
};

// fn(t0, t_end, rb, nr) for every block [t0, t_end) of `block` tokens (outer) and every
// 4-row tile [rb, rb + nr) of rows [r0, r1) (inner, in interleaved runs: row_runs.h).
template <typename Fn>
void ForEachTokenBlockAndTile(int64_t n_tokens, int64_t block, int64_t r0, int64_t r1, Fn&& fn) {
  const int64_t n_tiles = (r1 - r0 + 3) / 4;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t t_end = std::min(n_tokens, t0 + block);
    ForEachRowInRuns(t_end - t0, 0, n_tiles, [&](int64_t tile) {
      const int64_t rb = r0 + 4 * tile;
      fn(t0, t_end, rb, std::min<int64_t>(4, r1 - rb));
    });
  }
}

void MatMulRowsInt8Tiled(const WeightMatrix& w, const TileActivations& a,
                         const PairedTileTokens* paired, int64_t n_tokens, float* y, int64_t r0,
                         int64_t r1) {
  const int64_t cols = w.cols, n_lanes = cols / 8;
  const int64_t w_stride = TileWeightRowBytes(w.type, cols);
  const int offset = Int8TileOffset(w.type);
  thread_local std::vector<uint8_t> w_q;
  thread_local std::vector<float> w_d;
  w_q.resize(static_cast<size_t>(4 * w_stride));
  w_d.resize(static_cast<size_t>(4 * n_lanes));
  auto token = [&](int64_t t) {
    return TileOperand{a.q + t * cols, a.d_lanes + t * n_lanes, a.corr + t * n_lanes};
  };
  const int64_t block = TokenBlock(cols + 2 * n_lanes * 4);  // q, d_lanes and corr per token
  ForEachTokenBlockAndTile(n_tokens, block, r0, r1, [&](int64_t t0, int64_t t_end, int64_t rb, int64_t nr) {
    TileOperand wt[4];
    for (int r = 0; r < 4; ++r) {
      const int64_t row =
          rb + std::min<int64_t>(r, nr - 1);  // pad a short tile with its last row
      if (r < nr)
        PrepareTileWeightRow(w.type, w.data + row * w.row_bytes, cols, w_q.data() + r * w_stride,
                             w_d.data() + r * n_lanes);
      const int64_t slot = std::min<int64_t>(r, nr - 1);
      wt[r] = TileOperand{w_q.data() + slot * w_stride, w_d.data() + slot * n_lanes, nullptr};
    }
    if (paired != nullptr) {  // avx512: 8 tokens (4 register pairs) per call
      for (int64_t t = t0; t < t_end; t += 8) {
        const int64_t n = std::min<int64_t>(8, t_end - t);
        float out[4][8];
        DotInt8TilePaired(offset, wt, *paired, static_cast<int>(t / 2),
                          static_cast<int>((n + 1) / 2), out);
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t k = 0; k < n; ++k) y[(t + k) * w.rows + rb + r] = out[r][k];
        }
      }
      return;
    }
    for (int64_t t = t0; t < t_end; t += 4) {
      // A short last group repeats its last token (each output has the same bits
      // whatever shares its tile).
      const int64_t n = std::min<int64_t>(4, t_end - t);
      const TileOperand at[4] = {token(t), token(t + std::min<int64_t>(1, n - 1)),
                                 token(t + std::min<int64_t>(2, n - 1)),
                                 token(t + std::min<int64_t>(3, n - 1))};
      float out[4][4];
      DotInt8Tile4x4(offset, wt, at, cols / 64, out);
      for (int64_t r = 0; r < nr; ++r) {
        for (int64_t k = 0; k < n; ++k) y[(t + k) * w.rows + rb + r] = out[r][k];
      }
    }
  });
}

// Q8_0 / Q5_0 weights (SumsInLlamaCppOrder) and many tokens, in llama.cpp's order
// (q0_gemm.h): each tile of 4 weight rows is prepared once per token block and multiplied
// with every token pair of the block, up to 4 pairs per call.
void MatMulRowsQ0Tiled(const WeightMatrix& w, const Q0Tokens& a, float* y, int64_t r0, int64_t r1) {
  const int64_t n_blocks = a.n_blocks, n_tokens = a.n_tokens;
  thread_local std::vector<uint8_t> w_u;
  thread_local std::vector<float> w_d;
  w_u.resize(static_cast<size_t>(4 * 32 * n_blocks));
  w_d.resize(static_cast<size_t>(4 * n_blocks));
  // A multiple of 16 tokens, so each call's 4 pairs lie in one group (q0_gemm.h).
  const int64_t block = std::max<int64_t>(16, TokenBlock(n_blocks * kQ0RecordBytes / 2) / 16 * 16);
  ForEachTokenBlockAndTile(n_tokens, block, r0, r1, [&](int64_t t0, int64_t t_end, int64_t rb, int64_t nr) {
    Q0Row rows[4];
    for (int r = 0; r < 4; ++r) {
      const int64_t slot = std::min<int64_t>(r, nr - 1);  // a short tile repeats its last row
      if (r < nr) {
        PrepareQ0Row(w.type, w.data + (rb + r) * w.row_bytes, n_blocks, w_u.data() + r * 32 * n_blocks,
                     w_d.data() + r * n_blocks);
      }
      rows[r] = Q0Row{w_u.data() + slot * 32 * n_blocks, w_d.data() + slot * n_blocks};
    }
    for (int64_t t = t0; t < t_end; t += 8) {
      const int64_t n = std::min<int64_t>(8, t_end - t);
      float out[4][8];
      DotQ0Tile(w.type, rows, a, static_cast<int>(t / 2), static_cast<int>((n + 1) / 2), out);
      for (int64_t r = 0; r < nr; ++r) {
        for (int64_t k = 0; k < n; ++k) y[(t + k) * w.rows + rb + r] = out[r][k];
      }
    }
  });
}

// Chunks of rows per pool thread (see ForRows): many for the products bound by
// arithmetic, few for a few tokens' (decode's), bound by memory: each chunk starts its
// interleaved runs (row_runs.h) as new streams (`tandem bench model` decode on the
// Qwen3-30B-A3B-shaped MoE, 2 threads, AVX-512 Xeon: 74.8-79.3 tok/s with 2 chunks per
// thread against 71.2-75.3 with 8, four pairs alternating; docs/PERFORMANCE.md).
constexpr int64_t kChunksPerThread = 8;
constexpr int64_t kDecodeChunksPerThread = 2;

// Tokens from which quantizing the activations is worth spreading over the pool.
constexpr int64_t kMinTokensForParallelQuantize = 16;

// Tokens from which the tiled path beats one dot per (row, token)...
constexpr int64_t kMinTokensForTiling = 4;
// ... except on a matrix that streams from DRAM (the LM head): there the tile's per-call
// weight preparation is a second pass over every byte, and the row path (each weight
// pair decoded once per four tokens) wins up to 16 tokens (kernels_bench lm_head:
// 1.5x at 4-5 tokens, 1.2x at 8-16, one thread, AMD EPYC AVX2). The avx512 row path (16
// tokens per decoded pair) wins up to 48 (kernels_bench lm_head on the AVX-512 Xeon: 1.1-1.3x
// at 17-48 tokens, 0.9x at 64; 40 = 8 sequences verifying 4 speculative tokens each).
int64_t MaxTokensForRowsOnLargeMatrices() {
  return ChosenInt8Kernel() == Int8Kernel::kAvx512Vnni ? 48 : 16;
}
constexpr int64_t kLargeMatrixBytes = int64_t{8} << 20;

// Rows in chunks of whole tiles taken from a shared counter, kChunksPerThread per thread
// on average (kDecodeChunksPerThread for n_tokens <= kMaxTokensForRuns): a thread that a
// busy neighbour on the same core slows down takes fewer chunks instead of holding the
// others at the end of every MatMul.
template <typename Rows>
void ForRows(const WeightMatrix& w, int64_t n_tokens, ThreadPool* pool, const Rows& rows) {
  if (pool == nullptr || pool->num_threads() == 1) {
    rows(0, w.rows);
    return;
  }
  const int64_t tiles = (w.rows + kTileRows - 1) / kTileRows;
  const int64_t per_thread = n_tokens <= kMaxTokensForRuns ? kDecodeChunksPerThread : kChunksPerThread;
  const int64_t n_chunks = std::min<int64_t>(tiles, per_thread * pool->num_threads());
  const int64_t chunk_rows = (tiles + n_chunks - 1) / n_chunks * kTileRows;
  std::atomic<int64_t> next{0};
  pool->ParallelFor(pool->num_threads(), 1, [&](int, int64_t, int64_t) {
    for (int64_t begin = next.fetch_add(chunk_rows, std::memory_order_relaxed); begin < w.rows;
         begin = next.fetch_add(chunk_rows, std::memory_order_relaxed)) {
      rows(begin, std::min(w.rows, begin + chunk_rows));
    }
  });
}

// Activation rows are prepared on the pool too when there are many (a prompt chunk):
// each token's row is independent, and one thread doing all of them idles the others.
template <typename One>
void ForTokens(int64_t n_tokens, ThreadPool* pool, const One& one) {
  if (pool == nullptr || pool->num_threads() == 1 || n_tokens < kMinTokensForParallelQuantize) {
    for (int64_t t = 0; t < n_tokens; ++t) one(t);
  } else {
    pool->ParallelFor(n_tokens, 1, [&](int, int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) one(t);
    });
  }
}

// The int8 tile kinds (Q8_0, Q5_0, Q4_0): the tile for many tokens, one row at a time
// (same bits) for a few.
void MatMulTile(const WeightMatrix& w, const TileActivations& a, int64_t n_tokens, float* y, ThreadPool* pool) {
  const int64_t n_lanes = w.cols / 8;
  const bool large = w.rows * w.row_bytes >= kLargeMatrixBytes;
  if (n_tokens >= (large ? MaxTokensForRowsOnLargeMatrices() + 1 : kMinTokensForTiling)) {
    // The avx512 tile takes the tokens in register pairs, laid out once here.
    thread_local PairedTileTokens paired_tokens;
    const PairedTileTokens* paired = nullptr;
    if (ChosenInt8Kernel() == Int8Kernel::kAvx512Vnni) {
      std::vector<TileOperand> at(static_cast<size_t>(n_tokens));
      for (int64_t t = 0; t < n_tokens; ++t) {
        at[t] = TileOperand{a.q + t * w.cols, a.d_lanes + t * n_lanes, a.corr + t * n_lanes};
      }
      PairTileTokens(at.data(), static_cast<int>(n_tokens), w.cols / 64, false, &paired_tokens);
      paired = &paired_tokens;
    }
    ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) { MatMulRowsInt8Tiled(w, a, paired, n_tokens, y, begin, end); });
    return;
  }
  std::vector<TileOperand> at(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    at[t] = TileOperand{a.q + t * w.cols, a.d_lanes + t * n_lanes, a.corr + t * n_lanes};
  }
  ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) {
    DotTileRows(w.type, w.data + begin * w.row_bytes, w.row_bytes, end - begin, at.data(), static_cast<int>(n_tokens),
                w.cols / 64, y + begin, w.rows);
  });
}

// Weights with an integer dot against quantized activation rows (quant_dot.h).
void MatMulQuantized(const WeightMatrix& w, const uint8_t* xq, int64_t a_row_bytes, int64_t n_tokens, float* y,
                     ThreadPool* pool) {
  if (SumsInLlamaCppOrder(w.type)) {
    thread_local Q0Tokens q0_tokens;
    const Q0Tokens& tokens = q0_tokens;  // the pool's threads read this thread's copy
    PairQ0Tokens(w.type, xq, a_row_bytes, static_cast<int>(n_tokens), w.cols / 32, &q0_tokens);
    // The row path up to 16 tokens on a large matrix (8 token pairs, one record group per
    // pass); beyond, the tile is faster (kernels_bench lm_head, AVX-512 Xeon: the row path
    // 45-47 / 68-69 ms against the tile's 40-43 / 50-54 at 24 / 32 tokens; at 16 the two
    // are within a few percent).
    const bool large = w.rows * w.row_bytes >= kLargeMatrixBytes;
    if (n_tokens >= (large ? 17 : kMinTokensForTiling)) {
      ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) { MatMulRowsQ0Tiled(w, tokens, y, begin, end); });
    } else {
      ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) {
        DotQ0Rows(w.type, w.data + begin * w.row_bytes, w.row_bytes, end - begin, tokens, y + begin, w.rows);
      });
    }
    return;
  }
  thread_local PairedQ8K paired_q8k;
  const PairedQ8K* paired = nullptr;
  if (n_tokens >= 2 && HasPairedQ8KDot(w.type)) {
    PairQ8KRows(xq, a_row_bytes, static_cast<int>(n_tokens), w.cols / 256, &paired_q8k);
    paired = &paired_q8k;
  }
  ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) { MatMulRowsQ8(w, xq, a_row_bytes, paired, n_tokens, y, begin, end); });
}

}  // namespace

MatMulInput::Kind MatMulInput::KindOf(TensorType type, int64_t cols, int* key) {
  if (type == TensorType::kI8Rows) {
    *key = 0;
    return Kind::kI8;
  }
  if (HasInt8Tile(type) && !SumsInLlamaCppOrder(type) && cols % 64 == 0) {
    *key = Int8TileOffset(type);
    return Kind::kTile;
  }
  const ActivationFormat format = ActivationFormatFor(type);
  *key = static_cast<int>(format);
  return format != ActivationFormat::kF32 && HasQ8Dot(type) ? Kind::kQuantized : Kind::kFloat;
}

bool MatMulInput::NeedsPreparation(TensorType type, int64_t cols) {
  int key = 0;
  return KindOf(type, cols, &key) != Kind::kFloat || static_cast<ActivationFormat>(key) != ActivationFormat::kF32;
}

bool MatMulInput::Fits(TensorType type, int64_t cols) const {
  int key = 0;
  const Kind kind = KindOf(type, cols, &key);
  // kI8Rows by type: the dynamic quantization.
  if (kind == Kind::kI8 && act_scale_ != 0) return false;
  return kind == kind_ && key == key_ && cols == cols_;
}

bool MatMulInput::Fits(const WeightMatrix& w) const {
  if (w.type != TensorType::kI8Rows) return Fits(w.type, w.cols);
  if (kind_ != Kind::kI8 || cols_ != w.cols || w.i8 == nullptr) return false;
  // Static parameters equal bit for bit (dynamic: both 0).
  const float scale = w.i8->is_static() ? w.i8->act_scale : 0.0f;
  const float offset = w.i8->is_static() ? w.i8->act_offset : 0.0f;
  return std::memcmp(&scale, &act_scale_, sizeof(float)) == 0 &&
         std::memcmp(&offset, &act_offset_, sizeof(float)) == 0;
}

void MatMulInput::Resize(int64_t n) {
  n_ = n;
  if (kind_ == Kind::kTile) {  // int8 values, scale lanes and corrections per row
    q_.resize(static_cast<size_t>(n * cols_));
    d_.resize(static_cast<size_t>(n * cols_ / 8));
    c_.resize(static_cast<size_t>(n * cols_ / 8));
  } else if (kind_ == Kind::kI8) {
    // Rows of xq + 128 (64-byte aligned: whole cache lines per load), s_t, sum(xq).
    bytes_.resize(static_cast<size_t>(n * row_bytes_ + 64));
    align_ = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(bytes_.data()) % 64) % 64);
    d_.resize(static_cast<size_t>(n));
    c_.resize(static_cast<size_t>(n));
  } else {
    bytes_.resize(static_cast<size_t>(n * row_bytes_));
  }
}

void MatMulInput::Prepare(TensorType type, int64_t cols, const float* x, int64_t n_tokens, ThreadPool* pool) {
  PrepareFor(type, cols, nullptr, x, n_tokens, pool);
}

void MatMulInput::Prepare(const WeightMatrix& w, const float* x, int64_t n_tokens,
                          ThreadPool* pool) {
  TANDEM_CHECK(w.valid());
  if (w.type == TensorType::kI8Rows) I8RowsCheck(w);
  PrepareFor(w.type, w.cols, w.i8, x, n_tokens, pool);
}

void MatMulInput::PrepareFor(TensorType type, int64_t cols, const Int8RowParams* i8, const float* x,
                             int64_t n_tokens, ThreadPool* pool) {
  kind_ = KindOf(type, cols, &key_);
  cols_ = cols;
  if (kind_ == Kind::kI8) {
    const bool is_static = i8 != nullptr && i8->is_static();
    act_scale_ = is_static ? i8->act_scale : 0.0f;
    act_offset_ = is_static ? i8->act_offset : 0.0f;
    row_bytes_ = I8RowStride(cols);
    Resize(n_tokens);
    float* s = d_.data();
    int32_t* sums = c_.data();
    const float scale = act_scale_, offset = act_offset_;
    ForTokens(n_tokens, pool, [&](int64_t t) {
      QuantizeI8Activations(x + t * cols, cols, scale, offset, i8_row(t), s + t, sums + t);
    });
    return;
  }
  act_scale_ = act_offset_ = 0;
  // kTile: the tile's layout; else the weight type's partner format (quant_dot.h), or
  // floats, rounded when the format rounds (F16 / BF16 weights), else copied.
  const auto format = static_cast<ActivationFormat>(key_);
  row_bytes_ = kind_ == Kind::kTile                 ? cols
               : format == ActivationFormat::kF32 ? cols * 4
                                                  : ActivationRowBytes(format, cols);
  Resize(n_tokens);
  if (kind_ == Kind::kTile) {
    const int64_t n_lanes = cols / 8;
    const int offset = key_;
    int8_t* q = q_.data();
    float* d = d_.data();
    int32_t* c = c_.data();
    ForTokens(n_tokens, pool, [&](int64_t t) {
      PrepareTileActivationRow(x + t * cols, cols, offset, q + t * cols, d + t * n_lanes, c + t * n_lanes);
    });
    return;
  }
  uint8_t* out = bytes_.data();
  const int64_t rb = row_bytes_;
  ForTokens(n_tokens, pool, [&](int64_t t) {
    if (format == ActivationFormat::kF32) {
      std::memcpy(out + t * rb, x + t * cols, static_cast<size_t>(rb));
    } else {
      QuantizeActivations(format, x + t * cols, cols, out + t * rb);
    }
  });
}

void MatMulInput::Gather(const MatMulInput& from, const int64_t* rows, int64_t n) {
  TANDEM_CHECK(this != &from);
  kind_ = from.kind_;
  key_ = from.key_;
  cols_ = from.cols_;
  row_bytes_ = from.row_bytes_;
  act_scale_ = from.act_scale_;
  act_offset_ = from.act_offset_;
  Resize(n);
  if (kind_ == Kind::kI8) {
    for (int64_t i = 0; i < n; ++i) {
      TANDEM_CHECK(rows[i] >= 0 && rows[i] < from.n_);
      std::copy_n(from.i8_row(rows[i]), row_bytes_, i8_row(i));
      d_[i] = from.d_[rows[i]];
      c_[i] = from.c_[rows[i]];
    }
    return;
  }
  if (kind_ == Kind::kTile) {
    const int64_t n_lanes = cols_ / 8;
    for (int64_t i = 0; i < n; ++i) {
      TANDEM_CHECK(rows[i] >= 0 && rows[i] < from.n_);
      std::copy_n(&from.q_[rows[i] * cols_], cols_, &q_[i * cols_]);
      std::copy_n(&from.d_[rows[i] * n_lanes], n_lanes, &d_[i * n_lanes]);
      std::copy_n(&from.c_[rows[i] * n_lanes], n_lanes, &c_[i * n_lanes]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    TANDEM_CHECK(rows[i] >= 0 && rows[i] < from.n_);
    std::copy_n(&from.bytes_[rows[i] * row_bytes_], row_bytes_, &bytes_[i * row_bytes_]);
  }
}

void MatMul(const WeightMatrix& w, const MatMulInput& x, int64_t first, int64_t n, float* y, ThreadPool* pool) {
  TANDEM_CHECK(w.valid());
  TANDEM_CHECK(x.Fits(w))
      << "a MatMul input prepared for other weights (or other activation quantization)";
  TANDEM_CHECK(first >= 0 && n >= 0 && first + n <= x.n_);
  if (n == 0) return;
  switch (x.kind_) {
    case MatMulInput::Kind::kTile: {
      const int64_t n_lanes = w.cols / 8;
      const TileActivations a{x.q_.data() + first * w.cols, x.d_.data() + first * n_lanes,
                              x.c_.data() + first * n_lanes, w.cols};
      MatMulTile(w, a, n, y, pool);
      return;
    }
    case MatMulInput::Kind::kQuantized:
      MatMulQuantized(w, x.bytes_.data() + first * x.row_bytes_, x.row_bytes_, n, y, pool);
      return;
    case MatMulInput::Kind::kFloat: {
      const auto* xf = reinterpret_cast<const float*>(x.bytes_.data() + first * x.row_bytes_);
      ForRows(w, n, pool, [&](int64_t begin, int64_t end) { MatMulRows(w, xf, n, y, begin, end); });
      return;
    }
    case MatMulInput::Kind::kI8: {
      I8RowsCheck(w);
      I8Tokens tokens;
      tokens.u = x.i8_row(first);
      tokens.stride = x.row_bytes_;
      tokens.s = x.d_.data() + first;
      tokens.sum = x.c_.data() + first;
      ForRows(w, n, pool,
              [&](int64_t begin, int64_t end) { I8RowsProduct(w, tokens, n, y, begin, end); });
      return;
    }
    case MatMulInput::Kind::kNone:
      break;
  }
  TANDEM_CHECK(false) << "an unprepared MatMul input";
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  TANDEM_CHECK(w.valid());
  if (n_tokens == 0) return;
  if (!MatMulInput::NeedsPreparation(w.type, w.cols)) {
    ForRows(w, n_tokens, pool, [&](int64_t begin, int64_t end) { MatMulRows(w, x, n_tokens, y, begin, end); });
    return;
  }
  // Prepared once per call, by the calling thread (on the pool for many tokens).
  thread_local MatMulInput input;
  input.Prepare(w, x, n_tokens, pool);
  MatMul(w, input, 0, n_tokens, y, pool);
}

void MatMulSameInput(std::initializer_list<std::pair<const WeightMatrix*, float*>> products, const float* x,
                     int64_t n_tokens, ThreadPool* pool) {
  constexpr size_t kMaxInputs = 4;
  thread_local MatMulInput inputs[kMaxInputs];
  size_t prepared = 0;
  for (const auto& [w, y] : products) {
    TANDEM_CHECK(w->valid());
    const bool plain = !MatMulInput::NeedsPreparation(w->type, w->cols);
    size_t j = 0;
    while (j < prepared && !inputs[j].Fits(*w)) ++j;
    if (plain || (j == prepared && prepared == kMaxInputs)) {
      MatMul(*w, x, n_tokens, y, pool);
      continue;
    }
    if (j == prepared) inputs[prepared++].Prepare(*w, x, n_tokens, pool);
    MatMul(*w, inputs[j], 0, n_tokens, y, pool);
  }
}

void GetRow(const WeightMatrix& w, int64_t row, float* out) {
  TANDEM_CHECK(row >= 0 && row < w.rows) << "row " << row << " of " << w.rows;
  if (w.type == TensorType::kI8Rows) return DequantizeI8Row(w, row, out);
  DequantizeRow(w.type, w.data + row * w.row_bytes, out, w.cols);
}

}  // namespace tandem
