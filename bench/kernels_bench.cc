// kernels_bench: Google Benchmark microbenchmarks of the CPU kernels (src/kernels) at the
// default model's shapes (gemma3-270m), with a memory-bandwidth reference in the same run.
//
//   build/src/kernels/kernels_bench --benchmark_min_time=0.2 [--benchmark_filter=MatMul/Q8_0]
//
// This file: the bandwidth reference and MatMul (GEMV at 1 token, GEMM at 16/128/512).
// kernels_bench_ops.cc: VecDotQ8, DotInt8Tile4x4 (per int8 kernel), quantizers, dequantizers,
// ops.h, and the attention core. kernels_bench_blas.cc: OpenBLAS / oneDNN sgemm against MatMul
// (built only where those libraries are installed). kernels_bench_w8a8.cc: per-channel int8 weights
// (kI8Rows) against Q8_0 at a 1.5B model's and a MoE expert's shapes. Every benchmark is named
// Kernel/<type>/<shape>/.../threads:N, where N is the ThreadPool size (the caller is one
// of the N threads), and reports real time; counters:
//   bytes  weight (or buffer) bytes read per second: GEMV and the bandwidth reference;
//   FLOP   2 * rows * cols * n_tokens per second: GEMM.
// docs/PERFORMANCE.md ("Kernel microbenchmarks") holds a run and how to read it.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels_bench_util.h"

namespace tandem::bench {
namespace {

// --- Memory bandwidth reference ------------------------------------------------------

// Sum of n words; plain C++ that the compiler vectorizes (baseline SSE2), with 8
// independent sums so the adds keep up with two loads per cycle.
// Preconditions: n % 8 == 0.
uint64_t SumWords(const uint64_t* p, int64_t n) {
  uint64_t s[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += p[i + k];
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

// Reads a buffer of `bytes` once per iteration, split across the pool's threads.
// 256 MiB is far beyond the 32 MiB L3, so it measures DRAM bandwidth: the ceiling for
// the LM-head GEMV. 2 MiB stays in L2/L3 like the ffn matrices (1-3 MB each).
void BM_ReadBandwidth(benchmark::State& state, int64_t bytes, int threads) {
  const int64_t n_words = bytes / 8;
  std::vector<uint64_t> buffer(static_cast<size_t>(n_words));
  for (int64_t i = 0; i < n_words; ++i) buffer[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool.ParallelFor(n_words, 4096, [&](int t, int64_t begin, int64_t end) {
      sums[static_cast<size_t>(t)] = SumWords(buffer.data() + begin, end - begin);
    });
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  SetBytesRate(state, static_cast<double>(bytes));
}

// --- MatMul --------------------------------------------------------------------------

// y[n_tokens, rows] = x[n_tokens, cols] · Wᵀ through the public MatMul, as Forward calls it.
void BM_MatMul(benchmark::State& state, TensorType type, Shape shape, int64_t n_tokens,
               int threads) {
  const std::vector<uint8_t>& data = CachedWeights(type, shape.rows, shape.cols);
  WeightMatrix w;
  w.type = type;
  w.data = data.data();
  w.rows = shape.rows;
  w.cols = shape.cols;
  w.row_bytes = *RowBytes(type, shape.cols);
  RunMatMul(state, w, n_tokens, threads);
}

// The weight types of the issue, most used first (Q5_0 / Q4_0 also as repacked at load).
const std::vector<TensorType>& MatMulTypes() {
  static const std::vector<TensorType> types = {
      TensorType::kQ8_0,   TensorType::kQ5_0, TensorType::kQ5_0x2, TensorType::kQ4_0,
      TensorType::kQ4_0x2, TensorType::kQ4_K, TensorType::kQ5_K,   TensorType::kQ6_K,
      TensorType::kBF16,   TensorType::kF16,  TensorType::kF32};
  return types;
}

void AddContext() {
  const CpuFeatures& f = GetCpuFeatures();
  std::string isa;
  isa += f.avx2 ? "avx2 " : "";
  isa += f.fma ? "fma " : "";
  isa += f.f16c ? "f16c " : "";
  isa += f.avx512f ? "avx512f " : "";
  isa += f.avx_vnni ? "avx_vnni " : "";
  benchmark::AddCustomContext("tandem_cpu_features", isa.empty() ? "none" : isa);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", load[0], load[1], load[2]);
    benchmark::AddCustomContext("load_average_at_start", text);
  }
}

}  // namespace

void RegisterMatMulBenchmarks() {
  for (int threads : {1, 2}) {
    for (int64_t bytes : {int64_t{256} << 20, int64_t{2} << 20}) {
      const std::string name =
          "ReadBandwidth/" + std::to_string(bytes >> 20) + "MiB/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), BM_ReadBandwidth, bytes, threads)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (TensorType type : MatMulTypes()) {
    for (const Shape& shape : {kFfnUp, kFfnDown}) {
      if (shape.cols % TraitsOf(type).block_elems != 0) continue;  // K-quants: ffn_down only
      std::vector<int64_t> token_counts = {1, 16, 512};
      // The float types also at 128, to meet the BLAS comparison (kernels_bench_blas.cc).
      if (type == TensorType::kF32 || type == TensorType::kF16) token_counts = {1, 16, 128, 512};
      for (int64_t n_tokens : token_counts) {
        for (int threads : {1, 2}) {
          const std::string name = "MatMul/" + TypeName(type) + "/" + ShapeName(shape) +
                                   "/tokens:" + std::to_string(n_tokens) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, type, shape, n_tokens, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  // The LM head (tied Q8_0 token embedding): ~72% of the bytes one decode step reads, and
  // ~60% of the multiply-adds of a batched decode step (16 sequences). 17-40: speculative
  // verification steps (8 sequences x 5 tokens = 40).
  for (int64_t n_tokens : {1, 2, 4, 5, 8, 16, 17, 24, 32, 40, 48, 64}) {
    for (int threads : {1, 2}) {
      const std::string name = "MatMul/Q8_0/" + ShapeName(kLmHead) +
                               "/tokens:" + std::to_string(n_tokens) +
                               "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, TensorType::kQ8_0, kLmHead, n_tokens,
                                   threads)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace tandem::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tandem::bench::AddContext();
  tandem::bench::RegisterMatMulBenchmarks();
  tandem::bench::RegisterOpBenchmarks();
  tandem::bench::RegisterBlasBenchmarks();
  tandem::bench::RegisterW8A8Benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::fflush(stdout);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    std::fprintf(stderr, "load average at end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}
