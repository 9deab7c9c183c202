#include "engine/step_watchdog.h"

#include <chrono>
#include <cstdio>

namespace tandem {

int64_t StepWatchdog::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void StepWatchdog::WorkArrived(bool engine_idle) {
  if (engine_idle && !has_work_.load()) last_progress_ns_.store(NowNs());
  has_work_.store(true);
}

EngineHealth StepWatchdog::Health(const std::string& group_error) const {
  EngineHealth h;
  if (loop_exited_.load()) {
    h.healthy = false;
    h.reason = "the engine loop has stopped";
    return h;
  }
  if (!group_error.empty()) {
    h.healthy = false;
    h.reason = group_error;
    return h;
  }
  h.seconds_since_step = static_cast<double>(NowNs() - last_progress_ns_.load()) / 1e9;
  if (has_work_.load() && h.seconds_since_step > limit_s_) {
    h.healthy = false;
    char why[160];
    std::snprintf(why, sizeof(why),
                  "the engine loop has not completed a step for %.1f s with work queued (watchdog %.1f s)",
                  h.seconds_since_step, limit_s_);
    h.reason = why;
  }
  return h;
}

}  // namespace tandem
