// Shared helpers of the kernel microbenchmarks (bench/kernels_bench*.cc): random but
// valid weight rows of every GGML type, random activations, the gemma3-270m shapes, and
// the counters the benchmarks report.
//
// Thread safety: the helpers are called from the benchmark thread only.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor_type.h"
#include "kernels/matmul.h"

namespace tandem::bench {

// A weight matrix shape: `rows` output features x `cols` input features (contiguous).
struct Shape {
  const char* name;  // the gemma3-270m tensor it stands for
  int64_t rows;
  int64_t cols;
};

// gemma3-270m (n_embd 640, n_ff 2048, n_vocab 262144). The K-quants need cols % 256 == 0,
// so only ffn_down (cols 2048) exists in them; the model's own ffn_up is Q5_0.
inline constexpr Shape kFfnUp = {"ffn_up", 2048, 640};
inline constexpr Shape kFfnDown = {"ffn_down", 640, 2048};
inline constexpr Shape kLmHead = {"lm_head", 262144, 640};

// Rows of `type` with `cols` values each, [rows, RowBytes(type, cols)] bytes: random
// payload bytes with fp16 scales in [0.001, 0.05) at each block's scale fields, or
// uniform [-1, 1) values for F32/F16/BF16, so no kernel sees NaN, Inf or denormals.
// Deterministic in `seed`. Preconditions: cols is a multiple of the type's block.
std::vector<uint8_t> RandomWeights(TensorType type, int64_t rows, int64_t cols, uint64_t seed);

// The same, generated once per (type, rows, cols) and kept for the life of the process
// (the LM head is 178 MB; benchmark functions run several times).
const std::vector<uint8_t>& CachedWeights(TensorType type, int64_t rows, int64_t cols);

// n floats, normally distributed (mean 0, stddev 1), deterministic in `seed`.
std::vector<float> RandomFloats(int64_t n, uint64_t seed);

// "Q8_0", "F16", ...
std::string TypeName(TensorType type);

// "ffn_up_2048x640"
inline std::string ShapeName(const Shape& s) {
  return std::string(s.name) + "_" + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

// The first 64-byte-aligned element of v, which must hold 64 bytes of slack past what the
// caller uses. For benchmarks that memcpy: glibc's memcpy on this AMD CPU is several times
// slower when source and destination sit 16 bytes apart modulo 64, which malloc's 16-byte
// alignment leaves to chance (docs/PERFORMANCE.md, KV-cache pool).
template <typename T>
T* Align64(std::vector<T>& v) {
  const auto addr = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<T*>((addr + 63) & ~uintptr_t{63});
}

// Counters. Rates are per second of real time (every benchmark uses UseRealTime(), since
// the thread pool's workers do part of the work).
inline void SetBytesRate(benchmark::State& state, double bytes_per_iteration) {
  state.counters["bytes"] = benchmark::Counter(
      bytes_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
inline void SetFlopRate(benchmark::State& state, double flop_per_iteration) {
  state.counters["FLOP"] = benchmark::Counter(
      flop_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Times MatMul(w, x) on `n_tokens` random activation rows with a pool of `threads`;
// reports the weight bytes per second for one token, FLOP per second for more.
void RunMatMul(benchmark::State& state, const WeightMatrix& w, int64_t n_tokens, int threads);

// Registration, one call per file, from main() in kernels_bench.cc.
void RegisterMatMulBenchmarks();  // kernels_bench.cc: bandwidth reference, MatMul
void RegisterOpBenchmarks();      // kernels_bench_ops.cc: dots, quantizers, ops, attention
void RegisterBlasBenchmarks();    // kernels_bench_blas.cc: OpenBLAS / oneDNN sgemm if built
void RegisterW8A8Benchmarks();    // kernels_bench_w8a8.cc: kI8Rows against Q8_0

}  // namespace tandem::bench
