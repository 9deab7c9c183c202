#include "common/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

namespace tandem {

bool PinCurrentThread(int cpu_id) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu_id, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int CoresAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&set));
}

ThreadPool::ThreadPool(int num_threads, std::vector<int> cpu_ids)
    : num_threads_(num_threads > 0        ? num_threads
                   : !cpu_ids.empty()     ? static_cast<int>(cpu_ids.size())
                                          : CoresAvailable()) {
  if (!cpu_ids.empty()) PinCurrentThread(cpu_ids[0]);
  for (int i = 1; i < num_threads_; ++i) {
    int cpu = cpu_ids.empty() ? -1 : cpu_ids[i % cpu_ids.size()];
    workers_.emplace_back([this, i, cpu] {
      if (cpu >= 0) PinCurrentThread(cpu);
      WorkerLoop(i);
    });
  }
}

namespace {
// ~1-2 microseconds of polling before sleeping on the futex.
constexpr int kSpinIterations = 2000;

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunShare(int index) {
  // Split [0, n) into num_threads_ ranges aligned to the grain.
  int64_t blocks = (n_ + grain_ - 1) / grain_;
  int64_t per = blocks / num_threads_, extra = blocks % num_threads_;
  int64_t b0 = index * per + std::min<int64_t>(index, extra);
  int64_t b1 = b0 + per + (index < extra ? 1 : 0);
  int64_t begin = std::min(n_, b0 * grain_), end = std::min(n_, b1 * grain_);
  if (begin < end) (*fn_)(index, begin, end);
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  while (true) {
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations; ++spins) {
      CpuRelax();
    }
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    RunShare(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, 0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  RunShare(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0 && spins < kSpinIterations; ++spins) {
    CpuRelax();
  }
  for (int left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire)) {
    pending_.wait(left, std::memory_order_acquire);
  }
  fn_ = nullptr;
}

}  // namespace tandem
