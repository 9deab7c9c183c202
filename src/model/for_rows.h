// ForRows / ForEachRow: the forward pass's parallel loop over rows (tokens, heads,
// tasks), with or without a thread pool. Internal to src/model (forward*.cc); not part of its API.
//
// Thread safety: `fn` runs concurrently on disjoint [begin, end) ranges when a pool is
// given; it must only write state its range owns. ForRows itself returns when all
// ranges are done, and is as reentrant as ThreadPool::ParallelFor (not at all).
#pragma once

#include <cstdint>

#include "common/thread_pool.h"

namespace tandem {

// Runs fn(begin, end) over [0, n): once over the whole range when `pool` is null, else
// split by pool->ParallelFor into ranges in multiples of `grain`.
template <typename Fn>
void ForRows(ThreadPool* pool, int64_t n, int64_t grain, Fn&& fn) {
  if (pool == nullptr) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

// Runs fn(i) for each i in [0, n): ForRows with grain 1, one call per row.
template <typename Fn>
void ForEachRow(ThreadPool* pool, int64_t n, Fn&& fn) {
  ForRows(pool, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

}  // namespace tandem
