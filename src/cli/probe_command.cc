// `tandem probe readiness|liveness`: the deployment guide's vllm_probe.py and
// vllm_probe_yr.py (+ yr_liveness_check.sh, etcd_liveness_check.sh; all in
// tests/data/seed_scripts) as one command (ops/health_probe.h).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "net/host_address.h"
#include "ops/health_probe.h"

namespace tandem::cli {
namespace {

struct ProbeFlags {
  std::string url;   // overrides host/port
  std::string host;  // default: this host's address, as the probe scripts
  int port = 8000;
  std::string model = "glm5";
  std::string api_key;
  int max_tokens = 2;
  double timeout_s = 1200;
  std::string log_file = "./health_check_probe.log";
  // liveness
  std::string role;  // positional, as `python vllm_probe_yr.py master`
  std::string role_flag;
  std::string liveness_file = "/workspace/liveness";
  int liveness_timeout_s = 30;
  std::string etcd_address;  // default: this host's address :12379, as the probe scripts
  double etcd_timeout_s = 5;
};

void AddReadinessFlags(CLI::App* cmd, ProbeFlags* f) {
  cmd->add_option("--url", f->url,
                  "chat completions URL (default http://HOST:PORT/v1/chat/completions)");
  cmd->add_option("--host", f->host, "entry point host (default: this host's address)");
  cmd->add_option("--port", f->port, "entry point port")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  cmd->add_option("--model", f->model, "model name in the request")->capture_default_str();
  cmd->add_option("--api-key", f->api_key, "bearer token (default: $VLLM_API_KEY)");
  cmd->add_option("--max-tokens", f->max_tokens, "max_tokens of the probe request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--timeout", f->timeout_s, "request timeout in seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--log-file", f->log_file, "appended log (\"\" for none)")->capture_default_str();
}

ops::ReadinessProbeOptions ReadinessOptions(const ProbeFlags& f) {
  ops::ReadinessProbeOptions o;
  const std::string host = f.host.empty() ? net::HostnameAddress() : f.host;
  o.url = !f.url.empty() ? f.url
                         : "http://" + host + ":" + std::to_string(f.port) + "/v1/chat/completions";
  o.model = f.model;
  o.api_key = f.api_key;
  if (o.api_key.empty()) {
    if (const char* env = std::getenv("VLLM_API_KEY"); env != nullptr) o.api_key = env;
  }
  o.max_tokens = f.max_tokens;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  o.log_file = f.log_file;
  return o;
}

int RunLiveness(const ProbeFlags& f) {
  const std::string role = !f.role_flag.empty() ? f.role_flag : f.role;
  if (role != "master" && role != "slave") {
    std::cerr << "tandem: probe liveness needs the node role: master or slave\n";
    return 2;
  }
  ops::LivenessProbeOptions o;
  o.master = role == "master";
  o.liveness_file = f.liveness_file;
  o.liveness_timeout = std::chrono::seconds(f.liveness_timeout_s);
  o.etcd_address = !f.etcd_address.empty() ? f.etcd_address : net::HostnameAddress() + ":12379";
  o.etcd_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.etcd_timeout_s * 1000));
  o.readiness = ReadinessOptions(f);
  return ops::RunLivenessProbe(o, std::cout);
}

}  // namespace

void RegisterProbe(CLI::App& app, RunFn* run) {
  auto flags = std::make_shared<ProbeFlags>();
  CLI::App* probe = app.add_subcommand("probe", "readiness and liveness probes (the deployment guide's)");
  probe->require_subcommand(1);

  CLI::App* readiness = probe->add_subcommand(
      "readiness", "a chat completion through the entry point (vllm_probe.py)");
  AddReadinessFlags(readiness, flags.get());
  readiness->callback([flags, run] {
    *run = [flags] { return ops::RunReadinessProbe(ReadinessOptions(*flags), std::cout); };
  });

  CLI::App* liveness = probe->add_subcommand(
      "liveness",
      "pool liveness file; on master also etcd health and a chat completion (vllm_probe_yr.py)");
  liveness->add_option("role", flags->role, "master or slave")
      ->check(CLI::IsMember({"master", "slave"}));
  liveness->add_option("--role", flags->role_flag, "master or slave")
      ->check(CLI::IsMember({"master", "slave"}));
  liveness
      ->add_option("-f,--liveness-file", flags->liveness_file, "the pool worker's liveness file")
      ->capture_default_str();
  liveness
      ->add_option("-t,--liveness-timeout", flags->liveness_timeout_s,
                   "largest age of the liveness file, seconds")
      ->check(CLI::Range(0, 86400 * 365))
      ->capture_default_str();
  liveness->add_option("--etcd-address", flags->etcd_address,
                       "etcd client address HOST:PORT (default: this host's address:12379)");
  liveness->add_option("--etcd-timeout", flags->etcd_timeout_s, "etcd request timeout, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddReadinessFlags(liveness, flags.get());
  liveness->callback([flags, run] { *run = [flags] { return RunLiveness(*flags); }; });
}

}  // namespace tandem::cli
