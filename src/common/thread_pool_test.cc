#include "common/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

namespace tandem {
namespace {

TEST(ThreadPool, ZeroThreadsMeansOnePerCoreAvailable) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(CoresAvailable(), CPU_COUNT(&set));
  EXPECT_EQ(ThreadPool(0).num_threads(), CoresAvailable());
  EXPECT_EQ(ThreadPool(-1).num_threads(), CoresAvailable());
  EXPECT_EQ(ThreadPool(3).num_threads(), 3);
  // With an affinity list and no count: one thread per listed core. (On a thread of its
  // own: the pool pins the thread that makes it.)
  int pinned = 0;
  std::thread([&] { pinned = ThreadPool(0, {0, 0}).num_threads(); }).join();
  EXPECT_EQ(pinned, 2);
  EXPECT_EQ(CoresAvailable(), CPU_COUNT(&set));
}

TEST(ThreadPool, ParallelForCoversTheRangeOnEveryThread) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  std::set<int> seen;
  std::mutex mu;
  pool.ParallelFor(3000, 1, [&](int thread, int64_t begin, int64_t end) {
    int64_t s = 0;
    for (int64_t i = begin; i < end; ++i) s += i;
    sum += s;
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(thread);
  });
  EXPECT_EQ(sum.load(), int64_t{3000} * 2999 / 2);
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
}

}  // namespace
}  // namespace tandem
