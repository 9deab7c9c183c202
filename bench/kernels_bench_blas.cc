// kernels_bench, part 3: the float GEMMs through an optimized BLAS, to compare with
// tandem's MatMul on F32 and F16 weights (MatMul/F32/..., MatMul/F16/... in
// kernels_bench.cc, same shapes and token counts). The issue "CPU kernels" asks to keep
// whichever wins; this file only measures, MatMul does not use BLAS.
//
// Each library is optional: OpenBLAS (TANDEM_HAVE_OPENBLAS, Debian libopenblas-dev) and
// oneDNN (TANDEM_HAVE_ONEDNN, Debian libdnnl-dev); without either this file registers
// nothing. Both compute C[n_tokens, rows] = X[n_tokens, cols] · Wᵀ with W row-major
// [rows, cols] (sgemm with B transposed), as MatMul does. Variants:
//   Sgemm/<lib>/F32/...          W already float: for F16 weights this is the cost
//                                *excluding* conversion (weights converted once, at load,
//                                which doubles their memory).
//   Sgemm/<lib>/F16+convert/...  W stored fp16 and converted to float on every call
//                                (Fp16ToFp32Row, split over a ThreadPool of the same
//                                size), then sgemm: the cost *including* conversion.
// Threads: openblas_set_num_threads / omp_set_num_threads (oneDNN's Debian build uses
// OpenMP). The first run of each benchmark checks the result against MatMul on F32.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels_bench_util.h"

#if defined(TANDEM_HAVE_OPENBLAS)
#include <cblas.h>
#endif
#if defined(TANDEM_HAVE_ONEDNN)
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace tandem::bench {
namespace {

enum class Library { kOpenBlas, kOneDnn };

[[maybe_unused]] const char* LibraryName(Library lib) {
  return lib == Library::kOpenBlas ? "openblas" : "onednn";
}

// Sets the library's thread count for the calls that follow on this thread.
[[maybe_unused]] void SetLibraryThreads(Library lib, int threads) {
#if defined(TANDEM_HAVE_OPENBLAS)
  if (lib == Library::kOpenBlas) openblas_set_num_threads(threads);
#endif
#if defined(TANDEM_HAVE_ONEDNN)
  if (lib == Library::kOneDnn) omp_set_num_threads(threads);
#endif
}

// c[m, n] = a[m, k] · b[n, k]ᵀ, all row-major. Returns false if the library failed.
[[maybe_unused]] bool Sgemm(Library lib, int64_t m, int64_t n, int64_t k, const float* a,
                            const float* b, float* c) {
#if defined(TANDEM_HAVE_OPENBLAS)
  if (lib == Library::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k),
                b, static_cast<blasint>(k), 0.0f, c, static_cast<blasint>(n));
    return true;
  }
#endif
#if defined(TANDEM_HAVE_ONEDNN)
  if (lib == Library::kOneDnn) {
    return dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, k, b, k, 0.0f, c, n) == dnnl_success;
  }
#endif
  return false;
}

// Largest |c - ref| relative to the largest |ref|.
[[maybe_unused]] float RelativeError(const std::vector<float>& c, const std::vector<float>& ref) {
  float max_err = 0.0f, max_ref = 0.0f;
  for (size_t i = 0; i < c.size(); ++i) {
    max_err = std::max(max_err, std::fabs(c[i] - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  return max_ref > 0.0f ? max_err / max_ref : max_err;
}

[[maybe_unused]] void BM_Sgemm(benchmark::State& state, Library lib, bool convert_f16, Shape shape,
                               int64_t n_tokens, int threads) {
  const int64_t rows = shape.rows, cols = shape.cols;
  const std::vector<uint8_t>& w32_bytes = CachedWeights(TensorType::kF32, rows, cols);
  const std::vector<uint8_t>& w16_bytes = CachedWeights(TensorType::kF16, rows, cols);
  const auto* w16 = reinterpret_cast<const Fp16Bits*>(w16_bytes.data());  // [rows, cols]
  std::vector<float> w(static_cast<size_t>(rows * cols));                 // [rows, cols]
  const std::vector<float> x = RandomFloats(n_tokens * cols, 7);          // [n_tokens, cols]
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));             // [n_tokens, rows]
  ThreadPool pool(threads);
  SetLibraryThreads(lib, threads);

  // Check the call against MatMul on the float weights before timing anything.
  std::copy_n(reinterpret_cast<const float*>(w32_bytes.data()), w.size(), w.begin());
  WeightMatrix ref_w;
  ref_w.type = TensorType::kF32;
  ref_w.data = w32_bytes.data();
  ref_w.rows = rows;
  ref_w.cols = cols;
  ref_w.row_bytes = cols * static_cast<int64_t>(sizeof(float));
  std::vector<float> ref(y.size());
  MatMul(ref_w, x.data(), n_tokens, ref.data(), &pool);
  if (!Sgemm(lib, n_tokens, rows, cols, x.data(), w.data(), y.data()) ||
      RelativeError(y, ref) > 1e-4f) {
    state.SkipWithError("sgemm result differs from MatMul");
    return;
  }

  for (auto _ : state) {
    if (convert_f16) {
      pool.ParallelFor(rows, 16, [&](int, int64_t begin, int64_t end) {
        Fp16ToFp32Row(w16 + begin * cols, w.data() + begin * cols, (end - begin) * cols);
      });
    }
    Sgemm(lib, n_tokens, rows, cols, x.data(), w.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetFlopRate(state, 2.0 * static_cast<double>(rows * cols * n_tokens));
}

}  // namespace

void RegisterBlasBenchmarks() {
  std::vector<Library> libraries;
#if defined(TANDEM_HAVE_OPENBLAS)
  libraries.push_back(Library::kOpenBlas);
#endif
#if defined(TANDEM_HAVE_ONEDNN)
  libraries.push_back(Library::kOneDnn);
#endif
  std::string names;
  for (Library lib : libraries) names += std::string(names.empty() ? "" : " ") + LibraryName(lib);
  benchmark::AddCustomContext("sgemm_libraries", names.empty() ? "none (not built)" : names);
#if defined(TANDEM_HAVE_OPENBLAS) || defined(TANDEM_HAVE_ONEDNN)
  for (Library lib : libraries) {
    for (bool convert_f16 : {false, true}) {
      for (const Shape& shape : {kFfnUp, kFfnDown}) {
        for (int64_t n_tokens : {16, 128, 512}) {
          for (int threads : {1, 2}) {
            const std::string name = std::string("Sgemm/") + LibraryName(lib) +
                                     (convert_f16 ? "/F16+convert/" : "/F32/") + ShapeName(shape) +
                                     "/tokens:" + std::to_string(n_tokens) +
                                     "/threads:" + std::to_string(threads);
            benchmark::RegisterBenchmark(name.c_str(), BM_Sgemm, lib, convert_f16, shape, n_tokens,
                                         threads)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
#endif
}

}  // namespace tandem::bench
