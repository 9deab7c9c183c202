// Minimal leveled logging to stderr and CHECK macros for invariants.
//
//   TANDEM_LOG(INFO) << "loaded " << n << " tensors";
//   TANDEM_CHECK(n > 0) << "context";   // aborts with file:line when false
//
// Thread safety: each log line is written atomically (one write under a mutex).
#pragma once

#include <sstream>
#include <string_view>

namespace tandem {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Lines below this level are dropped. Default kInfo; env TANDEM_LOG_LEVEL=debug|info|warning|error.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes the line; aborts for kFatal
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream when a log line is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace tandem

#define TANDEM_LOG_LEVEL_DEBUG ::tandem::LogLevel::kDebug
#define TANDEM_LOG_LEVEL_INFO ::tandem::LogLevel::kInfo
#define TANDEM_LOG_LEVEL_WARNING ::tandem::LogLevel::kWarning
#define TANDEM_LOG_LEVEL_ERROR ::tandem::LogLevel::kError
#define TANDEM_LOG_LEVEL_FATAL ::tandem::LogLevel::kFatal

#define TANDEM_LOG(severity)                                         \
  (TANDEM_LOG_LEVEL_##severity < ::tandem::MinLogLevel())            \
      ? (void)0                                                      \
      : ::tandem::LogVoidify() &                                     \
            ::tandem::LogMessage(TANDEM_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()

#define TANDEM_CHECK(cond)                                                                  \
  (cond) ? (void)0                                                                          \
         : ::tandem::LogVoidify() &                                                         \
               ::tandem::LogMessage(::tandem::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                   << "Check failed: " #cond " "
