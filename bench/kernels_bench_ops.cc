// kernels_bench, part 2: the building blocks under MatMul (VecDotQ8, VecDotQ8x4,
// DotInt8Tile4x4, the activation quantizers, DequantizeRow), the element-wise ops of
// kernels/ops.h, the attention core, and the tile's two float orders (Int8LaneOrder). One row / vector per call, so these run from
// L1/L2: they measure compute, not memory. Counters: `bytes` = weight-row bytes per second
// (dots), `FLOP` (tile, attention), items_per_second = values per second (the rest).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <immintrin.h>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"
#include "kernels/ops.h"
#include "kernels/quant_dot.h"
#include "kernels_bench_util.h"

namespace tandem::bench {
namespace {

constexpr int64_t kCols = 2048;  // one ffn_down row (a multiple of every block size)

// A weight row of `type` and one activation row in its partner format, both [cols].
struct DotOperands {
  std::vector<uint8_t> w_row;
  std::vector<uint8_t> a_row;
};
DotOperands MakeDotOperands(TensorType type, int64_t cols, uint64_t seed) {
  DotOperands d;
  d.w_row = RandomWeights(type, 1, cols, seed);
  const std::vector<float> x = RandomFloats(cols, seed + 1);
  const ActivationFormat format = ActivationFormatFor(type);
  d.a_row.resize(static_cast<size_t>(ActivationRowBytes(format, cols)));
  QuantizeActivations(format, x.data(), cols, d.a_row.data());
  return d;
}

void BM_VecDotQ8(benchmark::State& state, TensorType type) {
  const DotOperands d = MakeDotOperands(type, kCols, 11);
  for (auto _ : state) {
    benchmark::DoNotOptimize(VecDotQ8(type, d.w_row.data(), d.a_row.data(), kCols));
  }
  SetBytesRate(state, static_cast<double>(d.w_row.size()));
}

// Four activation rows against one weight row (the K-quant GEMM path); bytes counts the
// weight row once, as the kernel reads it once.
void BM_VecDotQ8x4(benchmark::State& state, TensorType type) {
  const DotOperands d = MakeDotOperands(type, kCols, 13);
  const void* a_rows[4] = {d.a_row.data(), d.a_row.data(), d.a_row.data(), d.a_row.data()};
  float out[4];
  for (auto _ : state) {
    VecDotQ8x4(type, d.w_row.data(), a_rows, kCols, out);
    benchmark::DoNotOptimize(out);
  }
  SetBytesRate(state, static_cast<double>(d.w_row.size()));
}

// The int8 tile (int8_tile.h), 4 weight rows x 4 tokens of prepared operands: the
// Q8_0/Q5_0/Q4_0 prefill inner kernel, with each int8 kernel the CPU runs (scalar, avx2,
// avx-vnni, avx512-vnni). Operand preparation is outside the timed loop.
void BM_DotInt8Tile4x4(benchmark::State& state, TensorType type, int64_t cols, Int8Kernel kernel) {
  const int64_t row_bytes = *RowBytes(type, cols);
  const std::vector<uint8_t> rows = RandomWeights(type, 4, cols, 17);
  const std::vector<float> x = RandomFloats(2 * cols, 18);
  const int offset = Int8TileOffset(type);
  const int64_t w_stride = TileWeightRowBytes(type, cols);
  std::vector<uint8_t> wq(static_cast<size_t>(4 * w_stride));
  std::vector<float> wd(static_cast<size_t>(4 * cols / 8)), ad(static_cast<size_t>(2 * cols / 8));
  std::vector<int8_t> aq(static_cast<size_t>(2 * cols));
  std::vector<int32_t> ac(static_cast<size_t>(2 * cols / 8));
  TileOperand w[4];
  for (int r = 0; r < 4; ++r) {
    PrepareTileWeightRow(type, rows.data() + r * row_bytes, cols, wq.data() + r * w_stride,
                         wd.data() + r * cols / 8);
    w[r] = TileOperand{wq.data() + r * w_stride, wd.data() + r * cols / 8, nullptr};
  }
  for (int t = 0; t < 2; ++t) {
    PrepareTileActivationRow(x.data() + t * cols, cols, offset, aq.data() + t * cols,
                             ad.data() + t * cols / 8, ac.data() + t * cols / 8);
  }
  const TileOperand a0{aq.data(), ad.data(), ac.data()};
  const TileOperand a1{aq.data() + cols, ad.data() + cols / 8, ac.data() + cols / 8};
  const TileOperand a[4] = {a0, a1, a1, a0};
  float out[4][4];
  for (auto _ : state) {
    DotInt8Tile4x4(offset, w, a, cols / 64, out, kernel);
    benchmark::DoNotOptimize(out);
  }
  SetFlopRate(state, 2.0 * 4 * 4 * static_cast<double>(cols));
}

// The cost of llama.cpp's float order in the int8 tile (PERFORMANCE "Where the last bits
// part"): the avx512 tile's inner loop, 4 weight rows x 8 tokens (two per register) over
// `cols` values of random int8 operands, with 8 products per float lane (Tandem's tile:
// two vpdpbusd per multiply-add, one per pair of 32-blocks) against 4 (llama.cpp's
// tinyBLAS / vec_dot order: one vpdpbusd and one multiply-add per 32-block). Only the
// instruction mix is measured: the operands stay in cache and neither loop is a kernel of
// the engine.
template <int kProductsPerLane>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))) void BM_Int8LaneOrder(
    benchmark::State& state, int64_t cols) {
  const int64_t n_pairs = cols / 64, n_blocks = cols / 32;
  std::vector<uint8_t> w(static_cast<size_t>(4 * 2 * cols)), x(static_cast<size_t>(4 * 2 * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 40503u >> 7) & 0x7f);
  const std::vector<float> dw = RandomFloats(4 * n_blocks * 16, 31), dx = RandomFloats(4 * n_blocks * 16, 32);
  float out[4][4][16];
  for (auto _ : state) {
    __m512 acc[4][4];
    for (auto& row : acc)
      for (__m512& a : row) a = _mm512_setzero_ps();
    if constexpr (kProductsPerLane == 8) {
      for (int64_t p = 0; p < n_pairs; ++p) {
        for (int r = 0; r < 4; ++r) {
          const __m512i w0 = _mm512_loadu_si512(&w[(r * n_pairs + p) * 128]);
          const __m512i w1 = _mm512_loadu_si512(&w[(r * n_pairs + p) * 128 + 64]);
          const __m512 d = _mm512_loadu_ps(&dw[(r * n_pairs + p) * 16]);
          for (int h = 0; h < 4; ++h) {
            const uint8_t* xh = &x[(h * n_pairs + p) * 128];
            const __m512i sum = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, _mm512_loadu_si512(xh)), w1,
                _mm512_loadu_si512(xh + 64));
            acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_loadu_ps(&dx[(h * n_pairs + p) * 16])),
                                        _mm512_cvtepi32_ps(sum), acc[r][h]);
          }
        }
      }
    } else {
      for (int64_t b = 0; b < n_blocks; ++b) {
        for (int r = 0; r < 4; ++r) {
          const __m512i wb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(&w[(r * n_blocks + b) * 32])));
          const __m512 d = _mm512_set1_ps(dw[r * n_blocks + b]);
          for (int h = 0; h < 4; ++h) {
            const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wb,
                                                    _mm512_loadu_si512(&x[(h * n_blocks + b) * 64]));
            acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_loadu_ps(&dx[(h * n_blocks + b) * 16])),
                                        _mm512_cvtepi32_ps(sum), acc[r][h]);
          }
        }
      }
    }
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 4; ++h) _mm512_storeu_ps(out[r][h], acc[r][h]);
    benchmark::DoNotOptimize(out);
  }
  SetFlopRate(state, 2.0 * 4 * 8 * static_cast<double>(cols));
}

// One stored weight row against one prepared activation row (the decode path of the tile
// types), weight bytes per second.
void BM_DotTileRow(benchmark::State& state, TensorType type, int64_t cols) {
  const std::vector<uint8_t> row = RandomWeights(type, 1, cols, 21);
  const std::vector<float> x = RandomFloats(cols, 22);
  std::vector<int8_t> aq(static_cast<size_t>(cols));
  std::vector<float> ad(static_cast<size_t>(cols / 8));
  std::vector<int32_t> ac(static_cast<size_t>(cols / 8));
  PrepareTileActivationRow(x.data(), cols, Int8TileOffset(type), aq.data(), ad.data(), ac.data());
  const TileOperand a{aq.data(), ad.data(), ac.data()};
  for (auto _ : state) benchmark::DoNotOptimize(DotTileRow(type, row.data(), a, cols / 64));
  SetBytesRate(state, static_cast<double>(row.size()));
}

void BM_QuantizeActivations(benchmark::State& state, ActivationFormat format, int64_t cols) {
  const std::vector<float> x = RandomFloats(cols, 19);
  std::vector<uint8_t> out(static_cast<size_t>(ActivationRowBytes(format, cols)));
  for (auto _ : state) {
    QuantizeActivations(format, x.data(), cols, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * cols);
}

void BM_DequantizeRow(benchmark::State& state, TensorType type) {
  const std::vector<uint8_t> row = RandomWeights(type, 1, kCols, 23);
  std::vector<uint8_t> src_storage(row.size() + 64);
  std::vector<float> dst_storage(static_cast<size_t>(kCols) + 16);
  uint8_t* src = Align64(src_storage);  // F32 is a plain memcpy: keep it off the slow path
  float* dst = Align64(dst_storage);
  std::memcpy(src, row.data(), row.size());
  for (auto _ : state) {
    DequantizeRow(type, src, dst, kCols);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kCols);
}

// --- ops.h ------------------------------------------------------------------------------

// Runs op(a, b, out) over n-value buffers; `a` is restored from a copy before each call
// when the op works in place and repeating it would drift (GeluMul would decay to zero
// and denormals), so that benchmark includes an n-float memcpy.
template <typename Op>
void BM_Op(benchmark::State& state, int64_t n, bool restore_input, Op op) {
  const std::vector<float> a_init = RandomFloats(n, 29);
  std::vector<float> a0_storage(static_cast<size_t>(n) + 16), a_storage(a0_storage.size());
  float* a0 = Align64(a0_storage);
  float* a = Align64(a_storage);
  std::memcpy(a0, a_init.data(), a_init.size() * sizeof(float));
  std::memcpy(a, a0, a_init.size() * sizeof(float));
  const std::vector<float> b = RandomFloats(n, 31);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    if (restore_input) std::memcpy(a, a0, a_init.size() * sizeof(float));
    op(a, b.data(), out.data());
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_DotF16(benchmark::State& state, int64_t n) {
  std::vector<uint16_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  const std::vector<float> fa = RandomFloats(n, 37), fb = RandomFloats(n, 41);
  Fp32ToFp16Row(fa.data(), a.data(), n);
  Fp32ToFp16Row(fb.data(), b.data(), n);
  for (auto _ : state) benchmark::DoNotOptimize(DotF16(a.data(), b.data(), n));
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_AxpyF16(benchmark::State& state, int64_t n) {
  std::vector<uint16_t> x(static_cast<size_t>(n));
  const std::vector<float> fx = RandomFloats(n, 43);
  Fp32ToFp16Row(fx.data(), x.data(), n);
  std::vector<float> y(static_cast<size_t>(n), 0.0f);
  for (auto _ : state) {
    AxpyF16(1e-3f, x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// --- Attention --------------------------------------------------------------------------

// gemma3-270m: 4 query heads sharing one KV head of 256; scores scaled by 1/sqrt(256).
constexpr int kHeads = 4;
constexpr int kKvHeads = 1;
constexpr int kHeadDim = 256;
constexpr float kKqScale = 1.0f / 16.0f;

// The attention core of Forward::Attention (src/model/forward.cc). That is a private
// member which needs a loaded model, so this is a copy of its second loop over the same
// public kernels (keep the two in step): one task per (token, KV head), tokens taken
// first/last alternately, split over the pool in contiguous ranges as ForRows does; per
// task the group's query heads are rounded to fp16, scored against every visible position
// by DotF16RowsGroup (causal, no window), softmaxed, the probabilities rounded to fp16,
// and weighted over V by WeightedSumF16RowsGroup. K/V are plain [n_ctx, kKvHeads *
// kHeadDim] fp16 arrays here instead of a KvStore. RoPE, the norms and the K/V writes
// of Forward::Attention are not included (Rope and RmsNorm are benchmarked above).
//   q, out: [n_tokens, kHeads * kHeadDim]; token i sits at position first_pos + i.
void AttentionCore(const float* q, int64_t n_tokens, int64_t first_pos, const uint16_t* keys,
                   const uint16_t* values, float* out, ThreadPool* pool) {
  constexpr int q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim, group = kHeads / kKvHeads;
  pool->ParallelFor(n_tokens * kKvHeads, 1, [&](int, int64_t b, int64_t e) {
    thread_local std::vector<float> scores, qs;
    thread_local std::vector<uint16_t> q16, p16;
    thread_local std::vector<const uint16_t*> k_rows, v_rows;
    q16.resize(kHeadDim);
    qs.resize(group * kHeadDim);
    for (int64_t task = b; task < e; ++task) {
      const int64_t k = task / kKvHeads;
      const int64_t i = k % 2 == 0 ? k / 2 : n_tokens - 1 - k / 2;
      const int kvh = static_cast<int>(task % kKvHeads);
      const int64_t p = first_pos + i, len = p + 1;
      k_rows.resize(static_cast<size_t>(len));
      v_rows.resize(static_cast<size_t>(len));
      for (int64_t j = 0; j <= p; ++j) {
        k_rows[static_cast<size_t>(j)] = keys + j * kv_dim + kvh * kHeadDim;
        v_rows[static_cast<size_t>(j)] = values + j * kv_dim + kvh * kHeadDim;
      }
      scores.resize(static_cast<size_t>(group * len));
      p16.resize(static_cast<size_t>(len));
      const float* q_heads[group];
      float* score_heads[group];
      float* out_heads[group];
      for (int g = 0; g < group; ++g) {
        const int h = kvh * group + g;
        float* qg = &qs[static_cast<size_t>(g * kHeadDim)];
        Fp32ToFp16Row(q + i * q_dim + h * kHeadDim, q16.data(), kHeadDim);
        Fp16ToFp32Row(q16.data(), qg, kHeadDim);
        q_heads[g] = qg;
        score_heads[g] = &scores[static_cast<size_t>(g * len)];
        out_heads[g] = out + i * q_dim + h * kHeadDim;
      }
      DotF16RowsGroup(q_heads, group, k_rows.data(), len, kHeadDim, kKqScale, score_heads);
      for (int g = 0; g < group; ++g) {
        Softmax(score_heads[g], len);
        Fp32ToFp16Row(score_heads[g], p16.data(), len);
        Fp16ToFp32Row(p16.data(), score_heads[g], len);
      }
      WeightedSumF16RowsGroup(score_heads, group, v_rows.data(), len, kHeadDim, out_heads);
    }
  });
}

// n_tokens new tokens whose last sits at position n_ctx - 1: prefill is n_tokens == n_ctx
// (causal over the prompt), decode is n_tokens == 1 (one token over n_ctx cached positions).
void BM_Attention(benchmark::State& state, int64_t n_tokens, int64_t n_ctx, int threads) {
  const int64_t kv_dim = kKvHeads * kHeadDim;
  const std::vector<float> q = RandomFloats(n_tokens * kHeads * kHeadDim, 47);
  std::vector<uint16_t> keys(static_cast<size_t>(n_ctx * kv_dim)), values(keys.size());
  const std::vector<float> fk = RandomFloats(n_ctx * kv_dim, 53),
                           fv = RandomFloats(n_ctx * kv_dim, 59);
  Fp32ToFp16Row(fk.data(), keys.data(), n_ctx * kv_dim);
  Fp32ToFp16Row(fv.data(), values.data(), n_ctx * kv_dim);
  std::vector<float> out(q.size());
  ThreadPool pool(threads);
  const int64_t first_pos = n_ctx - n_tokens;
  for (auto _ : state) {
    AttentionCore(q.data(), n_tokens, first_pos, keys.data(), values.data(), out.data(), &pool);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Positions attended, summed over tokens; 2 FLOP per element for q·k and for p·v.
  const int64_t attended = n_tokens * first_pos + n_tokens * (n_tokens + 1) / 2;
  SetFlopRate(state, 4.0 * kHeads * kHeadDim * static_cast<double>(attended));
}

// One MLA decode task of Forward::MlaAttention (forward_mla.cc): 4 query heads against
// n_ctx shared K rows of kv_lora 512 + rope 64 (DeepSeek's / GLM-5's shape), softmaxed,
// probabilities through fp16, weighted over the rows' latent part. `ggml`: the kernels
// it runs (ggml_vec_dot_f16's order, DotF16RowsGgml / WeightedSumF16ColumnsGgml over the
// latents transposed once per step and sequence, not timed here: a decode step shares it
// among all head groups); else the GQA group kernels it ran before them
// (DotF16RowsGroup / WeightedSumF16RowsGroup).
void BM_MlaAttentionTask(benchmark::State& state, int64_t n_ctx, bool ggml) {
  constexpr int kGroup = 4, kLora = 512, kRow = 576;
  std::vector<uint16_t> rows(static_cast<size_t>(n_ctx * kRow));
  const std::vector<float> f = RandomFloats(n_ctx * kRow, 61);
  Fp32ToFp16Row(f.data(), rows.data(), n_ctx * kRow);
  std::vector<const uint16_t*> ptrs(static_cast<size_t>(n_ctx));
  for (int64_t j = 0; j < n_ctx; ++j) ptrs[j] = rows.data() + j * kRow;
  std::vector<float> q = RandomFloats(kGroup * kRow, 67), scores(static_cast<size_t>(kGroup * n_ctx)),
                     out(kGroup * kLora);
  std::vector<uint16_t> p16(static_cast<size_t>(n_ctx));
  std::vector<uint16_t> vt(static_cast<size_t>(kLora * (n_ctx + 32)));
  TransposeF16Rows(ptrs.data(), n_ctx, kLora, vt.data(), n_ctx + 32);
  const float* q_heads[kGroup];
  float* s_heads[kGroup];
  const float* p_heads[kGroup];
  float* o_heads[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    q_heads[g] = &q[g * kRow];
    s_heads[g] = &scores[g * n_ctx];
    p_heads[g] = s_heads[g];
    o_heads[g] = &out[g * kLora];
  }
  for (auto _ : state) {
    if (ggml) {
      DotF16RowsGgml(q_heads, kGroup, ptrs.data(), n_ctx, kRow, 0.07f, s_heads);
    } else {
      DotF16RowsGroup(q_heads, kGroup, ptrs.data(), n_ctx, kRow, 0.07f, s_heads);
    }
    for (int g = 0; g < kGroup; ++g) {
      Softmax(s_heads[g], n_ctx);
      Fp32ToFp16Row(s_heads[g], p16.data(), n_ctx);
      Fp16ToFp32Row(p16.data(), s_heads[g], n_ctx);
    }
    if (ggml) {
      WeightedSumF16ColumnsGgml(p_heads, kGroup, vt.data(), n_ctx + 32, n_ctx, kLora, o_heads);
    } else {
      WeightedSumF16RowsGroup(p_heads, kGroup, ptrs.data(), n_ctx, kLora, o_heads);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlopRate(state, 2.0 * kGroup * (kRow + kLora) * static_cast<double>(n_ctx));
}

// MlaAttention's per-step transposition of a sequence's latents (kv_lora 512 of each 576-value
// K row), shared by all its head groups.
void BM_TransposeLatents(benchmark::State& state, int64_t n_ctx) {
  constexpr int kLora = 512, kRow = 576;
  std::vector<uint16_t> rows(static_cast<size_t>(n_ctx * kRow), 0x3c00);
  std::vector<const uint16_t*> ptrs(static_cast<size_t>(n_ctx));
  for (int64_t j = 0; j < n_ctx; ++j) ptrs[j] = rows.data() + j * kRow;
  const int64_t stride = n_ctx + 32;  // MlaAttention's padding (columns not a page apart)
  std::vector<uint16_t> vt(static_cast<size_t>(kLora * stride));
  for (auto _ : state) {
    TransposeF16Rows(ptrs.data(), n_ctx, kLora, vt.data(), stride);
    benchmark::DoNotOptimize(vt.data());
    benchmark::ClobberMemory();
  }
}

// Registers one single-threaded benchmark, timed in real time like the others.
template <typename... Args>
void Add(const std::string& name, Args&&... args) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)->UseRealTime();
}

}  // namespace

void RegisterOpBenchmarks() {
  const TensorType dot_types[] = {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0,
                                  TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K};
  for (TensorType type : dot_types) {
    const std::string name = "VecDotQ8/" + TypeName(type) + "/cols:" + std::to_string(kCols);
    Add(name, BM_VecDotQ8, type);
  }
  for (TensorType type : dot_types) {
    if (!HasMultiTokenDot(type)) continue;
    const std::string name = "VecDotQ8x4/" + TypeName(type) + "/cols:" + std::to_string(kCols);
    Add(name, BM_VecDotQ8x4, type);
  }
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0,
                          TensorType::kQ5_0x2, TensorType::kQ4_0x2}) {
    for (int64_t cols : {int64_t{640}, kCols}) {
      const std::string suffix = TypeName(type) + "/cols:" + std::to_string(cols);
      for (Int8Kernel kernel : RunnableInt8Kernels()) {
        Add(std::string("DotInt8Tile4x4/") + Int8KernelName(kernel) + "/" + suffix, BM_DotInt8Tile4x4,
            type, cols, kernel);
      }
      Add("DotTileRow/" + suffix, BM_DotTileRow, type, cols);
    }
  }
  const CpuFeatures& cpu = GetCpuFeatures();
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vnni) {
    Add("Int8LaneOrder/products_per_lane:8/cols:2048", BM_Int8LaneOrder<8>, int64_t{2048});
    Add("Int8LaneOrder/products_per_lane:4/cols:2048", BM_Int8LaneOrder<4>, int64_t{2048});
  }
  const std::pair<const char*, ActivationFormat> formats[] = {{"Q8_0", ActivationFormat::kQ8_0},
                                                              {"Q8_K", ActivationFormat::kQ8_K}};
  for (const auto& [format_name, format] : formats) {
    for (int64_t cols : {int64_t{640}, kCols}) {
      if (format == ActivationFormat::kQ8_K && cols % 256 != 0) continue;
      const std::string name =
          std::string("QuantizeActivations/") + format_name + "/cols:" + std::to_string(cols);
      Add(name, BM_QuantizeActivations, format, cols);
    }
  }
  const TensorType dequant_types[] = {TensorType::kQ8_0, TensorType::kQ5_0, TensorType::kQ4_0,
                                      TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K,
                                      TensorType::kBF16, TensorType::kF16,  TensorType::kF32};
  for (TensorType type : dequant_types) {
    const std::string name = "DequantizeRow/" + TypeName(type) + "/cols:" + std::to_string(kCols);
    Add(name, BM_DequantizeRow, type);
  }

  // ops.h at the sizes Forward uses them (n_embd 640, n_ff 2048, head_dim 256).
  auto op = [](const std::string& name, int64_t n, bool restore, auto fn) {
    Add(name, [=](benchmark::State& s) { BM_Op(s, n, restore, fn); });
  };
  op("RmsNorm/n:640", 640, false,
     [](float* a, const float* b, float* out) { RmsNorm(a, b, out, 640, 1e-6f); });
  op("GeluMul+memcpy/n:2048", 2048, true,
     [](float* a, const float* b, float*) { GeluMul(a, b, 2048); });
  op("SiluMul+memcpy/n:2048", 2048, true,
     [](float* a, const float* b, float*) { SiluMul(a, b, 2048); });
  op("Softmax/n:512", 512, false, [](float* a, const float*, float*) { Softmax(a, 512); });
  op("Softmax/n:2048", 2048, false, [](float* a, const float*, float*) { Softmax(a, 2048); });
  op("Rope/head_dim:256/neox", 256, false,
     [](float* a, const float*, float*) { Rope(a, 256, 256, 1000, 1e6f, 1.0f, true); });
  op("AddInPlace/n:640", 640, false,
     [](float* a, const float* b, float*) { AddInPlace(a, b, 640); });
  op("DotF32/n:640", 640, false,
     [](float* a, const float* b, float* out) { out[0] = DotF32(a, b, 640); });
  Add("DotF16/n:256", BM_DotF16, int64_t{256});
  Add("AxpyF16/n:256", BM_AxpyF16, int64_t{256});

  benchmark::RegisterBenchmark("TransposeLatents/ctx:4096", BM_TransposeLatents, int64_t{4096})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  for (bool ggml : {false, true}) {
    const std::string name = std::string("MlaAttentionTask/decode/ctx:4096/") + (ggml ? "ggml_order" : "group_kernels");
    benchmark::RegisterBenchmark(name.c_str(), BM_MlaAttentionTask, int64_t{4096}, ggml)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }

  for (int threads : {1, 2}) {
    const std::string t = "/threads:" + std::to_string(threads);
    const std::string prefill = "Attention/prefill/tokens:512" + t;
    benchmark::RegisterBenchmark(prefill.c_str(), BM_Attention, int64_t{512}, int64_t{512}, threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (int64_t n_ctx : {int64_t{512}, int64_t{2048}}) {
      const std::string decode = "Attention/decode/ctx:" + std::to_string(n_ctx) + t;
      benchmark::RegisterBenchmark(decode.c_str(), BM_Attention, int64_t{1}, n_ctx, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace tandem::bench
