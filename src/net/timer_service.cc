#include "net/timer_service.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <thread>

#include "common/logging.h"

namespace tandem::net {

namespace asio = boost::asio;

class TimerService::Impl {
 public:
  Impl() : work_(io_.get_executor()) {
    thread_ = std::thread([this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          TANDEM_LOG(ERROR) << "exception escaped a timer callback: " << e.what();
        }
      }
    });
  }

  ~Impl() {
    work_.reset();
    io_.stop();  // pending waits are destroyed with io_, their callbacks never run
    thread_.join();
  }

  void RunAfter(std::chrono::milliseconds delay, std::function<void()> callback) {
    // The timer is created on the service thread so that no timer object is ever
    // touched by two threads.
    asio::post(io_, [this, delay, callback = std::move(callback)]() mutable {
      auto timer = std::make_shared<asio::steady_timer>(io_, delay);
      timer->async_wait([timer, callback = std::move(callback)](boost::system::error_code ec) {
        if (!ec) callback();
      });
    });
  }

 private:
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
};

TimerService::TimerService() : impl_(std::make_unique<Impl>()) {}
TimerService::~TimerService() = default;

void TimerService::RunAfter(std::chrono::milliseconds delay, std::function<void()> callback) {
  impl_->RunAfter(delay, std::move(callback));
}

}  // namespace tandem::net
