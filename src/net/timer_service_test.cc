#include "net/timer_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace tandem::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(TimerServiceTest, RunsAfterTheDelayInDeadlineOrder) {
  TimerService timers;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> done;
  const Clock::time_point start = Clock::now();
  timers.RunAfter(60ms, [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
    done.set_value();
  });
  timers.RunAfter(10ms, [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(1);
  });
  ASSERT_EQ(done.get_future().wait_for(2s), std::future_status::ready);
  EXPECT_GE(Clock::now() - start, 60ms);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(TimerServiceTest, CallbackMayScheduleAnother) {
  TimerService timers;
  std::promise<void> done;
  timers.RunAfter(0ms, [&] { timers.RunAfter(5ms, [&] { done.set_value(); }); });
  EXPECT_EQ(done.get_future().wait_for(2s), std::future_status::ready);
}

TEST(TimerServiceTest, DestructorDropsPendingCallbacks) {
  std::atomic<int> ran{0};
  auto token = std::make_shared<int>(0);
  {
    TimerService timers;
    timers.RunAfter(10s, [&ran, token] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(token.use_count(), 1);  // the dropped callback released its captures
}

}  // namespace
}  // namespace tandem::net
