#include "kernels/memory_bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <new>
#include <thread>
#include <vector>

#include "kernels/isa.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

// 64-byte aligned storage (aligned 256-bit loads).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

// Sums [lo, hi) with 256-bit loads (4 independent accumulators). `lo` is a multiple of 8
// elements (64 bytes), so the loads are aligned.
__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* p, size_t lo, size_t hi) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < hi; ++i) s += p[i];
  return s;
}

uint64_t SumScalar(const uint64_t* p, size_t lo, size_t hi) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = lo;
  for (; i + 4 <= hi; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < hi; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

double MeasureReadBandwidthGbps(const MemoryBandwidthOptions& options) {
  const int threads = std::max(1, options.threads);
  const int passes = std::max(1, options.passes);
  const bool avx2 = KernelIsaLevel() >= IsaLevel::kAvx2;
  const size_t n = std::max<size_t>(options.buffer_bytes / sizeof(uint64_t), 8);
  std::vector<uint64_t, AlignedAllocator<uint64_t>> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // faulted in before timing
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<std::thread> workers;
    const auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        // Slices start on 64-byte boundaries.
        const size_t lo = n * t / threads / 8 * 8,
                     hi = t + 1 == threads ? n : n * (t + 1) / threads / 8 * 8;
        sink.fetch_add(avx2 ? SumAvx2(buf.data(), lo, hi) : SumScalar(buf.data(), lo, hi),
                       std::memory_order_relaxed);
      });
    }
    for (auto& w : workers) w.join();
    // A clock tick too coarse for a tiny buffer must not give infinity: at least 1 ns.
    const double seconds =
        std::max(std::chrono::duration<double>(Clock::now() - start).count(), 1e-9);
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds / 1e9);
  }
  if (sink.load() == 42) std::fprintf(stderr, " ");  // keeps the sums alive
  return best;
}

}  // namespace tandem
