// ForEachRowInRuns: the order one token's rows of a weight matrix are read in (decode).
//
// One token reads each weight byte once, so its matrix product runs at the memory's
// speed; reading the rows front to back is one sequential stream per thread, which left
// the bandwidth unused. Splitting the rows into kDecodeRuns runs and taking one row of
// each in turn gives the hardware prefetchers that many streams (`tandem bench model`
// decode on the Qwen3-30B-A3B-shaped MoE, 2 threads, AVX-512 Xeon: 56 tok/s with one
// run, 71-72 with two, 72-74 with three or four, 69 with six; the default model 71-80 ->
// 101-102 tok/s with four). Each row's result is computed as before: only the order of
// the rows changes.
#pragma once

#include <cstdint>

namespace tandem {

constexpr int kDecodeRuns = 4;
// With more tokens per row the products are bound by arithmetic, not memory, and the runs
// cost (40 tokens: 7% slower, as the kernels' software prefetch expects the next rows);
// up to this many they are taken.
constexpr int kMaxTokensForRuns = 8;

// fn(r) for every r in [r0, r1): with n_tokens <= kMaxTokensForRuns rows r0 + j * part + i
// for i, then j (kDecodeRuns runs), then the rest; else in order.
template <typename Fn>
inline void ForEachRowInRuns(int64_t n_tokens, int64_t r0, int64_t r1, Fn&& fn) {
  const int runs = n_tokens <= kMaxTokensForRuns ? kDecodeRuns : 1;
  const int64_t part = (r1 - r0) / runs;
  for (int64_t i = 0; i < part; ++i) {
    for (int j = 0; j < runs; ++j) fn(r0 + j * part + i);
  }
  for (int64_t r = r0 + runs * part; r < r1; ++r) fn(r);
}

}  // namespace tandem
