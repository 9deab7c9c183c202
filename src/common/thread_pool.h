// ThreadPool: a fixed set of worker threads for data-parallel loops (ParallelFor).
//
// The calling thread takes part in every loop, so a pool of `num_threads` runs
// num_threads - 1 workers. Workers spin briefly before sleeping, because the engine
// issues hundreds of short loops per decoded token and a futex wake-up per loop
// would cost more than the work. Optionally each thread is pinned to one core.
//
// Thread safety: ParallelFor may be called from one thread at a time (the engine's
// step loop); it is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // `num_threads` threads; 0 (or less) means one per core: cpu_ids.size() when cpu_ids is
  // given, else CoresAvailable(). `cpu_ids`, if non-empty, pins thread i (the caller is
  // thread 0) to cpu_ids[i % cpu_ids.size()].
  explicit ThreadPool(int num_threads, std::vector<int> cpu_ids = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(thread_index, begin, end) over [0, n) split into num_threads contiguous
  // ranges, chunked in multiples of `grain` elements; returns when all ranges are done.
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int thread_index, int64_t begin, int64_t end)>& fn);

 private:
  void WorkerLoop(int index);
  void RunShare(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  // Futex-backed waits (std::atomic::wait) after a short spin on both sides.
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The current loop (valid while pending_ > 0).
  const std::function<void(int, int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
};

// The cores this process may run on (its affinity set, as `nproc` counts them); at least 1.
int CoresAvailable();

// Pins the calling thread to `cpu_id`; returns false if the OS refused.
bool PinCurrentThread(int cpu_id);

}  // namespace tandem
