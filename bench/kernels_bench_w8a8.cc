// kernels_bench: per-output-channel int8 weights (TensorType::kI8Rows, W8A8 checkpoints)
// against Q8_0, the same float weights quantized both ways, through the public MatMul.
//
//   build/src/kernels/kernels_bench --benchmark_min_time=0.2 --benchmark_filter='W8A8/'
//
// Shapes: a 1.5B dense model (Qwen2.5-1.5B: n_embd 1536, n_ff 8960) and a Qwen3-30B-A3B
// expert (n_embd 2048, n_ff_exp 768); tokens 1 (decode), 16 (batched decode), 512 (a
// prompt chunk); 1 and 2 threads. Each (shape, tokens, threads) runs Q8_0, I8_ROWS,
// Q8_0, I8_ROWS (the /round:N suffix), so the two sides alternate in time and a change
// of machine load falls on both (docs/PERFORMANCE.md).
// Names: W8A8/<type>/<shape>/tokens:N/threads:N/round:N; counters as kernels_bench.cc.
//
// W8A8Kernel/<type>/<kernel>/<shape>/tokens:N/round:N: the same two products through each
// Int8Kernel this CPU runs (TANDEM_ISA selects one per process; this names them), one
// thread, the activations prepared once outside the timed loop: Q8_0 as MatMul runs it
// (q0_gemm.h: the row path below 4 tokens, else 4-row tiles against token pairs),
// I8_ROWS through I8RowsProduct. So plain AVX2 is measured on a CPU with VNNI too.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/i8_rows.h"
#include "kernels/int8_tile.h"
#include "kernels/matmul.h"
#include "kernels/q0_gemm.h"
#include "kernels/quant_dot.h"
#include "kernels_bench_util.h"

namespace tandem::bench {
namespace {

inline constexpr Shape kW8A8Shapes[] = {
    {"attn_1.5b", 1536, 1536},  // q / o projections of a 1.5B model
    {"up_1.5b", 8960, 1536},    // ffn gate / up
    {"down_1.5b", 1536, 8960},  // ffn down
    {"expert_up", 768, 2048},   // Qwen3-30B-A3B expert gate / up
    {"expert_down", 2048, 768},
};

// One float matrix ~ N(0, 1) quantized as Q8_0 (per 32-block fp16 scales) and as
// kI8Rows (one scale per row: amax / 127, round half to even; symmetric, dynamic
// activations: compressed-tensors W8A8).
struct BothWays {
  std::vector<uint8_t> q8_0;
  std::vector<int8_t> i8;
  std::vector<float> i8_scale;
  Int8RowParams params;
};

const BothWays& Weights(const Shape& s) {
  static std::map<std::pair<int64_t, int64_t>, std::unique_ptr<BothWays>> cache;
  auto& slot = cache[{s.rows, s.cols}];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<BothWays>();
  BothWays& b = *slot;
  const std::vector<float> f =
      RandomFloats(s.rows * s.cols, static_cast<uint64_t>(s.rows * 31 + s.cols));
  const int64_t q8_row = *RowBytes(TensorType::kQ8_0, s.cols);
  b.q8_0.resize(static_cast<size_t>(s.rows * q8_row));
  b.i8.resize(static_cast<size_t>(s.rows * s.cols));
  b.i8_scale.resize(static_cast<size_t>(s.rows));
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* row = &f[r * s.cols];
    // The Q8_0 weight format is the Q8_0 activation format (blocks of fp16 d + 32 int8).
    QuantizeActivations(ActivationFormat::kQ8_0, row, s.cols, &b.q8_0[r * q8_row]);
    float amax = 0;
    for (int64_t k = 0; k < s.cols; ++k) amax = std::max(amax, std::fabs(row[k]));
    b.i8_scale[r] = amax / 127.0f;
    for (int64_t k = 0; k < s.cols; ++k) {
      b.i8[r * s.cols + k] =
          static_cast<int8_t>(amax == 0 ? 0 : std::nearbyint(row[k] * (127.0f / amax)));
    }
  }
  b.params.scale = b.i8_scale.data();
  return b;
}

void BM_W8A8(benchmark::State& state, TensorType type, Shape shape, int64_t n_tokens, int threads) {
  const BothWays& b = Weights(shape);
  WeightMatrix w;
  w.type = type;
  w.rows = shape.rows;
  w.cols = shape.cols;
  if (type == TensorType::kQ8_0) {
    w.data = b.q8_0.data();
    w.row_bytes = *RowBytes(type, shape.cols);
  } else {
    w.data = reinterpret_cast<const uint8_t*>(b.i8.data());
    w.row_bytes = shape.cols;
    w.i8 = &b.params;
  }
  RunMatMul(state, w, n_tokens, threads);
}

// One product through `kernel`, activations prepared before the loop.
void BM_W8A8Kernel(benchmark::State& state, TensorType type, Int8Kernel kernel, Shape shape,
                   int64_t n_tokens) {
  const BothWays& b = Weights(shape);
  const std::vector<float> x = RandomFloats(n_tokens * shape.cols, 7);
  std::vector<float> y(static_cast<size_t>(n_tokens * shape.rows));
  if (type == TensorType::kQ8_0) {
    const int64_t row_bytes = *RowBytes(type, shape.cols), n_blocks = shape.cols / 32;
    std::vector<uint8_t> xq(static_cast<size_t>(n_tokens * row_bytes));
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantizeActivations(ActivationFormat::kQ8_0, &x[t * shape.cols], shape.cols,
                          &xq[t * row_bytes]);
    }
    Q0Tokens tokens;
    PairQ0Tokens(type, xq.data(), row_bytes, static_cast<int>(n_tokens), n_blocks, &tokens);
    std::vector<uint8_t> u(static_cast<size_t>(4 * 32 * n_blocks));
    std::vector<float> d(static_cast<size_t>(4 * n_blocks));
    for (auto _ : state) {
      if (n_tokens < 4) {
        DotQ0Rows(type, b.q8_0.data(), row_bytes, shape.rows, tokens, y.data(), shape.rows, kernel);
      } else {
        // matmul.cc's token blocks (a block's records stay in L2), a multiple of 16 tokens.
        const int64_t block =
            std::max<int64_t>(16, (192 << 10) / (n_blocks * kQ0RecordBytes / 2) / 16 * 16);
        for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
          for (int64_t r0 = 0; r0 < shape.rows; r0 += 4) {  // rows % 4 == 0 at these shapes
            Q0Row rows[4];
            for (int r = 0; r < 4; ++r) {
              PrepareQ0Row(type, &b.q8_0[(r0 + r) * row_bytes], n_blocks, &u[r * 32 * n_blocks],
                           &d[r * n_blocks]);
              rows[r] = Q0Row{&u[r * 32 * n_blocks], &d[r * n_blocks]};
            }
            for (int64_t t = t0; t < std::min(n_tokens, t0 + block);
                 t += 8) {  // n_tokens % 8 == 0 here
              float out[4][8];
              DotQ0Tile(type, rows, tokens, static_cast<int>(t / 2), 4, out, kernel);
              for (int r = 0; r < 4; ++r) {
                for (int k = 0; k < 8; ++k) y[(t + k) * shape.rows + r0 + r] = out[r][k];
              }
            }
          }
        }
      }
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  } else {
    WeightMatrix w;
    w.type = type;
    w.data = reinterpret_cast<const uint8_t*>(b.i8.data());
    w.rows = shape.rows;
    w.cols = shape.cols;
    w.row_bytes = shape.cols;
    w.i8 = &b.params;
    const int64_t stride = I8RowStride(shape.cols);
    std::vector<uint8_t> xu(static_cast<size_t>(n_tokens * stride + 64));
    uint8_t* rows = Align64(xu);
    std::vector<float> s(static_cast<size_t>(n_tokens));
    std::vector<int32_t> sums(static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantizeI8Activations(&x[t * shape.cols], shape.cols, 0, 0, rows + t * stride, &s[t],
                            &sums[t], kernel);
    }
    const I8Tokens tokens{rows, stride, s.data(), sums.data()};
    for (auto _ : state) {
      I8RowsProduct(w, tokens, n_tokens, y.data(), 0, shape.rows, kernel);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
    }
  }
  if (n_tokens == 1) {
    SetBytesRate(state,
                 static_cast<double>(
                     shape.rows * (type == TensorType::kQ8_0 ? shape.cols / 32 * 34 : shape.cols)));
  } else {
    SetFlopRate(state, 2.0 * static_cast<double>(shape.rows * shape.cols * n_tokens));
  }
}

}  // namespace

void RegisterW8A8Benchmarks() {
  for (const Shape& shape : kW8A8Shapes) {
    for (int64_t n_tokens : {1, 16, 512}) {
      for (int threads : {1, 2}) {
        for (int round = 1; round <= 2; ++round) {
          for (TensorType type : {TensorType::kQ8_0, TensorType::kI8Rows}) {
            const std::string name = "W8A8/" + TypeName(type) + "/" + ShapeName(shape) +
                                     "/tokens:" + std::to_string(n_tokens) +
                                     "/threads:" + std::to_string(threads) +
                                     "/round:" + std::to_string(round);
            benchmark::RegisterBenchmark(name.c_str(), BM_W8A8, type, shape, n_tokens, threads)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
  for (Int8Kernel kernel : RunnableInt8Kernels()) {
    for (const Shape& shape : {kW8A8Shapes[0], kW8A8Shapes[4]}) {
      for (int64_t n_tokens : {1, 16, 512}) {
        if (kernel == Int8Kernel::kScalar && n_tokens == 512) continue;  // seconds per call
        for (int round = 1; round <= 2; ++round) {
          for (TensorType type : {TensorType::kQ8_0, TensorType::kI8Rows}) {
            const std::string name = "W8A8Kernel/" + TypeName(type) + "/" + Int8KernelName(kernel) +
                                     "/" + ShapeName(shape) +
                                     "/tokens:" + std::to_string(n_tokens) +
                                     "/round:" + std::to_string(round);
            benchmark::RegisterBenchmark(name.c_str(), BM_W8A8Kernel, type, kernel, shape, n_tokens)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
}

}  // namespace tandem::bench
