// Process management for `tandem pool start|stop|run`, like `dscli start -w` / `dscli
// stop`: a pid file per worker address, a log file, daemonizing with a start-up
// handshake, and graceful stop by pid.
//
// Files: <run_dir>/pool-IP_PORT.pid, <log_dir>/pool-IP_PORT.log; run_dir is
// $TANDEM_POOL_RUN_DIR or /tmp/tandem-pool-<uid> (docs/POOL.md).
//
// Thread safety: call from the main thread before any other thread exists (fork).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"

namespace tandem::pool {

std::string PoolRunDir();
std::string PidFilePath(const std::string& worker_address);
std::string LogFilePath(const std::string& log_dir, const std::string& worker_address);

// The pid recorded for `worker_address` if that process is alive, else 0.
int RunningPid(const std::string& worker_address);

// Writes this process's pid file (FailedPrecondition when a live worker already owns it).
Status WritePidFile(const std::string& worker_address);
void RemovePidFile(const std::string& worker_address);

// Reports the child's start-up outcome to the waiting parent (call once).
using ReadyFn = std::function<void(const Status& status)>;

// Forks a daemon (new session, stdin from /dev/null, stdout/stderr to `log_path`) that
// runs `child(ready)` and exits with its return value. The parent waits until the
// child calls ready() or exits, at most `timeout`; returns the child's start-up status
// and its pid in *pid. Only the parent returns.
Status Daemonize(const std::string& log_path, std::chrono::seconds timeout,
                 const std::function<int(const ReadyFn& ready)>& child, int* pid);

// SIGTERM to the worker's pid, waits up to `timeout` for it to exit, then SIGKILL.
// NotFound when no live worker is recorded for the address.
Status StopWorkerProcess(const std::string& worker_address, std::chrono::seconds timeout);

}  // namespace tandem::pool
