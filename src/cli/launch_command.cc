// `tandem launch`: vllm-ascend's launch_online_dp.py — one run_dp_template.sh per local
// data-parallel rank, supervised (ops/launch_plan.h, ops/process_supervisor.h).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "common/logging.h"
#include "ops/launch_plan.h"
#include "ops/process_supervisor.h"

namespace tandem::cli {
namespace {

int RunLaunch(const ops::LaunchOptions& options, int stop_timeout_s) {
  if (!std::filesystem::exists(options.template_path)) {
    // The seed script's message and exit code.
    std::cout << "Template file " << options.template_path << " does not exist." << std::endl;
    return 1;
  }
  auto plan = ops::PlanLaunch(options);
  if (!plan.ok()) return ReportError(plan.status());
  ops::ProcessSupervisor supervisor(
      ops::SupervisorOptions{std::chrono::milliseconds(int64_t{stop_timeout_s} * 1000)});
  for (const ops::RankLaunch& rank : *plan) {
    const std::string name = "rank " + std::to_string(rank.dp_rank) + " (devices " +
                             rank.visible_devices + ", port " + std::to_string(rank.port) + ")";
    if (auto pid = supervisor.Start(name, rank.argv); !pid.ok()) {
      TANDEM_LOG(ERROR) << name << ": " << pid.status().ToString();
      break;  // Wait() stops the ranks already started
    }
  }
  const int code = supervisor.Wait();
  TANDEM_LOG(INFO) << "all ranks have exited; exit code " << code;
  return code;
}

}  // namespace

void RegisterLaunch(CLI::App& app, RunFn* run) {
  auto options = std::make_shared<ops::LaunchOptions>();
  auto stop_timeout_s = std::make_shared<int>(30);
  CLI::App* cmd = app.add_subcommand(
      "launch", "run ./run_dp_template.sh per local data-parallel rank (launch_online_dp.py)");
  ops::LaunchOptions& o = *options;
  cmd->add_option("--dp-size", o.dp_size, "data-parallel ranks over all nodes")->required();
  cmd->add_option("--tp-size", o.tp_size, "tensor-parallel size (devices per rank)")
      ->capture_default_str();
  cmd->add_option("--dp-size-local", o.dp_size_local, "ranks on this node (-1: --dp-size)")
      ->capture_default_str();
  cmd->add_option("--dp-rank-start", o.dp_rank_start, "global rank of this node's first rank")
      ->capture_default_str();
  cmd->add_option("--dp-address", o.dp_address, "address of the DP master node")->required();
  cmd->add_option("--dp-rpc-port", o.dp_rpc_port, "RPC port of the DP master node")
      ->capture_default_str();
  cmd->add_option("--vllm-start-port", o.vllm_start_port, "engine port of local rank 0")
      ->capture_default_str();
  cmd->add_option("--template", o.template_path, "the per-rank script")->capture_default_str();
  cmd->add_option("--stop-timeout", *stop_timeout_s, "seconds between the stop signal and SIGKILL")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  cmd->callback([options, stop_timeout_s, run] {
    *run = [options, stop_timeout_s] { return RunLaunch(*options, *stop_timeout_s); };
  });
}

}  // namespace tandem::cli
