// `tandem pool start|stop|run`: the KV-cache pool worker, with openYuanrong dscli's
// flags (`dscli start -w ...` / `dscli stop --worker_address ...`). Parses flags and
// wires src/pool (PoolWorker, daemon.h); no pool logic here.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/logging.h"
#include "pool/daemon.h"
#include "pool/pool_worker.h"

namespace tandem::cli {
namespace {

struct PoolFlags {
  pool::WorkerConfig config;
  std::string enable_huge_tlb = "false";
  std::string log_dir;
  std::string config_file;  // -f: JSON {"flag_name": value, ...}
  int timeout_s = 90;       // -t: start-up wait (start) or stop wait (stop)
  bool worker = false;      // -w: start a worker (the only kind there is)
  std::vector<CLI::Option*> ignored;
  std::map<std::string, CLI::Option*> options;  // by flag name, for -f
};

// dscli worker flags with no meaning here (NPU transfer, log layout, thread counts):
// accepted so the deployment's dscli command lines (docs/DEPLOY.md) run unchanged, and
// logged once as ignored.
constexpr const char* kIgnoredFlags[] = {"--arena_per_tenant",
                                         "--remote_h2d_device_ids",
                                         "--log_only_write_info_file",
                                         "--rpc_thread_num",
                                         "--enable_worker_worker_batch_get",
                                         "--max_client_num",
                                         "--log_monitor",
                                         "--minloglevel",
                                         "--client_reconnect_wait_s",
                                         "--heartbeat_interval_ms",
                                         "--enable_distributed_master",
                                         "--enable_urma",
                                         "--shared_disk_directory",
                                         "--shared_disk_size_mb"};

StatusOr<bool> ParseBool(const std::string& name, const std::string& v) {
  if (v == "true" || v == "1" || v == "True" || v == "TRUE" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "False" || v == "FALSE" || v == "no") return false;
  return InvalidArgumentError(name + ": expected true or false, got '" + v + "'");
}

void AddWorkerFlags(CLI::App* cmd, PoolFlags* f) {
  auto& c = f->config;
  auto add = [&](const std::string& name, auto* var, const std::string& help) {
    f->options[name] = cmd->add_option("--" + name, *var, help);
  };
  cmd->add_flag("-w,--worker", f->worker, "start a pool worker (dscli compatibility)");
  cmd->add_option("-t,--timeout", f->timeout_s, "seconds to wait for the worker to start (start)");
  cmd->add_option("-f,--worker_config_path", f->config_file,
                  "JSON file of flag values ({\"shared_memory_size_mb\": 1024, ...}); flags win");
  add("worker_address", &c.worker_address, "IP:PORT this worker listens on (TCP) and is known by");
  add("etcd_address", &c.etcd_address, "etcd IP:PORT[,IP:PORT]");
  add("shared_memory_size_mb", &c.shared_memory_mb, "shared-memory arena size in MiB");
  add("node_timeout_s", &c.node_timeout_s, "etcd lease TTL of this worker (seconds)");
  add("node_dead_timeout_s", &c.node_dead_timeout_s, "a worker absent this long leaves the ring");
  add("liveness_check_path", &c.liveness_check_path,
      "file rewritten with 'liveness check success'");
  add("enable_huge_tlb", &f->enable_huge_tlb, "true: back the arena with huge pages (falls back)");
  add("auth_token", &c.auth_token,
      "shared secret required on every worker and client connection "
      "(default: $TANDEM_POOL_AUTH_TOKEN)");
  add("metrics_port", &c.metrics_port, "HTTP port of /metrics (-1 = worker port + 1, 0 = off)");
  add("spill_directory", &c.spill_directory,
      "disk tier: objects evicted from the arena are written here and read back on a get "
      "(must exist and be writable; empty = no disk tier)");
  add("spill_size_limit", &c.spill_size_limit,
      "disk tier size limit in bytes (0 = 95% of the directory's free space at start)");
  f->options["spill_size_limit"]->check(CLI::NonNegativeNumber);
  add("eviction_high_watermark_ratio", &c.eviction_high_watermark_ratio,
      "arena eviction starts when an allocation would pass this fraction of the arena");
  add("eviction_ratio", &c.eviction_ratio, "fraction of the arena one eviction frees");
  add("default_kv_lease_ttl", &c.default_kv_lease_ttl_ms,
      "ms an object stays unevictable after a read, released or not (0, the default: only "
      "while the reader holds it pinned)");
  add("default_kv_soft_pin_ttl", &c.default_kv_soft_pin_ttl_ms,
      "ms a soft pin lasts without a read (default 30 min)");
  add("log_dir", &f->log_dir, "directory of the daemon's log file (default: the run dir)");
  for (const char* name : kIgnoredFlags) {
    f->ignored.push_back(cmd->add_option(name)->description("accepted; no effect")->expected(1));
  }
}

Status ApplyConfigFile(PoolFlags* f) {
  if (f->config_file.empty()) return Status::Ok();
  std::ifstream in(f->config_file);
  if (!in) return InvalidArgumentError("-f: cannot read " + f->config_file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object())
    return InvalidArgumentError("-f: " + f->config_file + " is not a JSON object");
  for (auto& [name, value] : j.items()) {
    auto it = f->options.find(name);
    if (it == f->options.end()) {
      TANDEM_LOG(WARNING) << "-f: ignoring unknown setting '" << name << "'";
      continue;
    }
    if (it->second->count() > 0) continue;  // the command line wins
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    try {
      it->second->add_result(text);
      it->second->run_callback();
    } catch (const CLI::Error& e) {
      return InvalidArgumentError("-f: " + name + ": " + e.what());
    }
  }
  return Status::Ok();
}

Status Finalize(PoolFlags* f) {
  TANDEM_RETURN_IF_ERROR(ApplyConfigFile(f));
  // The engines' pool client reads the same variable; it keeps the token out of `ps`.
  if (const char* token = std::getenv("TANDEM_POOL_AUTH_TOKEN");
      f->config.auth_token.empty() && token != nullptr) {
    f->config.auth_token = token;
  }
  TANDEM_ASSIGN_OR_RETURN(f->config.enable_huge_tlb,
                          ParseBool("--enable_huge_tlb", f->enable_huge_tlb));
  for (CLI::Option* opt : f->ignored) {
    if (opt->count() > 0)
      TANDEM_LOG(INFO) << opt->get_name() << " accepted; no effect in tandem pool";
  }
  return pool::ValidateWorkerConfig(f->config);
}

void BlockShutdownSignals(sigset_t* set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, set, nullptr);
}

// Runs the worker until SIGINT/SIGTERM; `ready` learns the start-up outcome.
int ServeWorker(const pool::WorkerConfig& config, const pool::ReadyFn& ready) {
  sigset_t set;
  BlockShutdownSignals(&set);  // before any thread starts, so only sigwait sees them
  Status s = pool::WritePidFile(config.worker_address);
  pool::PoolWorker worker(config);
  if (s.ok()) s = worker.Start();
  if (!s.ok()) {
    // Cleaned up before `start` hears of the failure: it returns as soon as it does.
    TANDEM_LOG(ERROR) << s.ToString();
    pool::RemovePidFile(config.worker_address);
    ready(s);
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  ready(s);
  int sig = 0;
  sigwait(&set, &sig);
  TANDEM_LOG(INFO) << "signal " << sig << ": shutting down";
  worker.Stop();
  pool::RemovePidFile(config.worker_address);
  return 0;
}

int ReportError(const Status& s) {
  std::cerr << "tandem pool: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

void RegisterPool(CLI::App& app, RunFn* run) {
  CLI::App* pool = app.add_subcommand("pool", "KV-cache pool worker (dscli-compatible)");
  pool->require_subcommand(1);

  auto start_flags = std::make_shared<PoolFlags>();
  CLI::App* start =
      pool->add_subcommand("start", "start a pool worker as a daemon (like dscli start -w)");
  AddWorkerFlags(start, start_flags.get());
  start->callback([run, start_flags] {
    *run = [start_flags]() -> int {
      PoolFlags& f = *start_flags;
      Status s = Finalize(&f);
      if (!s.ok()) return ReportError(s);
      if (int pid = pool::RunningPid(f.config.worker_address); pid != 0) {
        return ReportError(FailedPreconditionError("a pool worker for " + f.config.worker_address +
                                                   " is already running (pid " +
                                                   std::to_string(pid) + ")"));
      }
      std::string log_path = pool::LogFilePath(f.log_dir, f.config.worker_address);
      mkdir(pool::PoolRunDir().c_str(), 0700);
      int pid = 0;
      s = pool::Daemonize(
          log_path, std::chrono::seconds(std::max(1, f.timeout_s)),
          [&](const pool::ReadyFn& ready) { return ServeWorker(f.config, ready); }, &pid);
      if (!s.ok()) return ReportError(s);
      std::cout << "[  OK  ] Start worker service @ " << f.config.worker_address
                << " success, PID: " << pid << "\n  log: " << log_path
                << "\n  pid file: " << pool::PidFilePath(f.config.worker_address) << std::endl;
      return 0;
    };
  });

  auto run_flags = std::make_shared<PoolFlags>();
  CLI::App* run_cmd = pool->add_subcommand("run", "run a pool worker in the foreground");
  AddWorkerFlags(run_cmd, run_flags.get());
  run_cmd->callback([run, run_flags] {
    *run = [run_flags]() -> int {
      Status s = Finalize(run_flags.get());
      if (!s.ok()) return ReportError(s);
      return ServeWorker(run_flags->config, [](const Status&) {});
    };
  });

  auto stop_address = std::make_shared<std::string>();
  auto stop_timeout = std::make_shared<int>(30);
  CLI::App* stop =
      pool->add_subcommand("stop", "stop the pool worker of an address (SIGTERM, then SIGKILL)");
  stop->add_option("--worker_address", *stop_address, "IP:PORT of the worker to stop")->required();
  stop->add_option("-t,--timeout", *stop_timeout, "seconds to wait before SIGKILL");
  stop->callback([run, stop_address, stop_timeout] {
    *run = [stop_address, stop_timeout]() -> int {
      Status s =
          pool::StopWorkerProcess(*stop_address, std::chrono::seconds(std::max(1, *stop_timeout)));
      if (!s.ok()) return ReportError(s);
      std::cout << "[  OK  ] Stop worker service @ " << *stop_address << " success." << std::endl;
      return 0;
    };
  });
}

}  // namespace tandem::cli
