#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace tandem {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("TANDEM_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string_view v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& MinLevelStorage() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

std::mutex& WriteMutex() {
  static std::mutex mu;
  return mu;
}

char LevelChar(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
    case LogLevel::kFatal: return 'F';
  }
  return '?';
}

}  // namespace

void SetMinLogLevel(LogLevel level) { MinLevelStorage().store(static_cast<int>(level)); }
LogLevel MinLogLevel() { return static_cast<LogLevel>(MinLevelStorage().load()); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm_utc{};
  gmtime_r(&secs, &tm_utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%m-%d %H:%M:%S", &tm_utc);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  stream_ << LevelChar(level) << ' ' << stamp << '.' << (millis < 100 ? (millis < 10 ? "00" : "0") : "")
          << millis << ' ' << base << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string line = stream_.str();
  {
    std::lock_guard<std::mutex> lock(WriteMutex());
    ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
    (void)unused;
  }
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace tandem
