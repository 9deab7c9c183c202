// The health probes of `tandem probe`: what the deployment guide's `vllm_probe.py` (readiness) and
// `vllm_probe_yr.py` + `yr_liveness_check.sh` + `etcd_liveness_check.sh` (liveness) check,
// with the same requests, defaults, exit codes and log file (the scripts are kept
// verbatim in tests/data/seed_scripts; tests/test_ops.py runs both side by side).
//
// Readiness: one non-streaming chat completion ("hello", max_tokens 2, temperature 0.6,
// thinking off) through the entry point; ready when it answers 200 with non-empty
// choices[0].message.content.
// Liveness: the pool worker's liveness file exists, contains "liveness check success" and
// was modified within the timeout; on the master node also etcd's GET /health reports
// healthy and the readiness check passes. A slave node checks only the file.
//
// Every step is appended to the log file (the scripts' format: "DATE TIME [LEVEL] [where]
// message"); the scripts' success lines go to stdout.
//
// Thread safety: the functions are independent; each makes its own HTTP client.
#pragma once

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <string>

#include "common/status.h"

namespace tandem::ops {

struct ReadinessProbeOptions {
  std::string url;  // the chat completions URL, e.g. http://10.0.0.1:8000/v1/chat/completions
  std::string model = "glm5";
  std::string api_key;  // sent as "Authorization: Bearer KEY" when set
  int max_tokens = 2;
  double temperature = 0.6;
  std::chrono::milliseconds timeout{1'200'000};
  std::string log_file = "./health_check_probe.log";  // "" = no log file
};

struct LivenessProbeOptions {
  bool master = true;  // false: the pool file check only
  std::string liveness_file = "/workspace/liveness";
  std::chrono::seconds liveness_timeout{30};  // the file's largest allowed age
  std::string etcd_address;                   // host:port of etcd's client URL
  std::chrono::milliseconds etcd_timeout{5'000};
  ReadinessProbeOptions readiness;  // its log_file is the probe's log file
};

// OK when `path` exists, contains "liveness check success" and its modification time is
// at most `max_age` before `now`. FailedPrecondition (with the reason) otherwise.
Status CheckLivenessFile(const std::string& path, std::chrono::seconds max_age,
                         std::filesystem::file_time_type now);

// Both return the process exit code (0 healthy, 1 not) and write the scripts' stdout lines
// to `out`.
int RunReadinessProbe(const ReadinessProbeOptions& options, std::ostream& out);
int RunLivenessProbe(const LivenessProbeOptions& options, std::ostream& out);

}  // namespace tandem::ops
