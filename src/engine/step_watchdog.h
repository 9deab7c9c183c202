// StepWatchdog: whether the engine's step loop is making progress (GET /health). The
// loop reports each completed step and whether work remains; callers report work
// arriving. Unhealthy when the loop has exited, when the expert-parallel group is broken
// (the reason the caller passes), or when work is queued and no step completed for
// longer than the watchdog's limit (a stuck loop). An idle engine is healthy however
// long ago its last step was.
//
// Thread safety: every method may be called from any thread (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace tandem {

class StepWatchdog {
 public:
  explicit StepWatchdog(double limit_s) : limit_s_(limit_s) {}

  // Work arrived; `engine_idle`: nothing was queued or running. Work arriving at an
  // idle engine starts the clock afresh (the last step may be long ago); a busy or
  // stuck engine's clock is left alone.
  void WorkArrived(bool engine_idle);
  bool has_work() const { return has_work_.load(); }
  // The loop's reports.
  void StepCompleted() { last_progress_ns_.store(NowNs()); }
  void SetHasWork(bool has_work) { has_work_.store(has_work); }
  void LoopExited() { loop_exited_.store(true); }

  // `group_error`: non-empty when the expert-parallel group is broken.
  EngineHealth Health(const std::string& group_error) const;

 private:
  static int64_t NowNs();

  const double limit_s_;
  std::atomic<int64_t> last_progress_ns_{NowNs()};  // steady clock: the last step, or work arriving when idle
  std::atomic<bool> has_work_{false};
  std::atomic<bool> loop_exited_{false};
};

}  // namespace tandem
