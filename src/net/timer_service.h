// TimerService: runs callbacks after a delay, on one background thread, without a
// thread per waiting task (retry back-off, periodic health probes).
//
// Callbacks run one at a time on the service's thread, in deadline order; they must not
// block. The destructor drops callbacks that have not run yet (it destroys them without
// calling them) and joins the thread.
//
// Thread safety: RunAfter may be called from any thread, including from a callback.
// The destructor must not be called from a callback.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace tandem::net {

class TimerService {
 public:
  TimerService();
  ~TimerService();
  TimerService(const TimerService&) = delete;
  TimerService& operator=(const TimerService&) = delete;

  // Runs `callback` once, about `delay` from now (at once for delay <= 0).
  void RunAfter(std::chrono::milliseconds delay, std::function<void()> callback);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::net
