// `tandem up [--node NAME] [FILE]` and `tandem down [--node NAME] [FILE]`: start or stop
// one node of the cluster a description file defines (docs/DEPLOY.md). Parses flags and
// wires src/cluster; no cluster logic here.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "cluster/cluster_spec.h"
#include "cluster/node_plan.h"
#include "cluster/node_runner.h"
#include "cluster/node_stopper.h"

namespace tandem::cli {
namespace {

struct UpFlags {
  std::string file = "deploy/local.json";
  std::string node;
  std::string run_dir;
  bool detach = false;
  bool dry_run = false;
  double stop_timeout_s = 20;
};

struct DownFlags {
  std::string file = "deploy/local.json";
  std::string node;
  std::string run_dir;
  double timeout_s = 30;
};

std::string SelfBinary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "tandem" : self.string();
}

// The node to run: --node, else the only node of the file.
StatusOr<std::string> ChooseNode(const cluster::ClusterSpec& spec, const std::string& node) {
  if (!node.empty()) return node;
  if (spec.nodes.size() == 1) return spec.nodes.front().name;
  std::string names;
  for (const cluster::NodeSpec& n : spec.nodes) names += (names.empty() ? "" : ", ") + n.name;
  return InvalidArgumentError("the cluster file has " + std::to_string(spec.nodes.size()) +
                              " nodes; choose this host's with --node NAME (" + names + ")");
}

void PrintReady(const cluster::NodePlan& plan, const cluster::ClusterState& state,
                const std::string& down_command, bool detached) {
  std::cout << "\nnode " << state.node << " of cluster " << state.cluster << " is up:\n";
  for (const cluster::ServiceState& s : state.services) {
    std::cout << "  " << s.name << std::string(s.name.size() < 10 ? 10 - s.name.size() : 1, ' ')
              << "pid " << s.process.pid;
    for (const auto& [what, port] : s.ports) std::cout << "  " << what << " " << port;
    std::cout << "\n";
  }
  std::cout << "  logs in " << state.logs_dir << "\n";
  if (!state.proxy_url.empty()) {
    // The variable's name, not its value: the line is safe to paste and to log.
    const char* key = std::getenv("VLLM_API_KEY");
    const bool keyed = key != nullptr && *key != '\0';
    std::cout << "\nTry:\n  curl " << state.proxy_url
              << "/v1/chat/completions -H 'Content-Type: application/json' \\\n"
              << (keyed ? "    -H \"Authorization: Bearer $VLLM_API_KEY\" \\\n" : "")
              << "    -d '{\"model\": \"" << plan.served_model_name
              << "\", \"messages\": [{\"role\": \"user\", \"content\": \"Write a haiku about "
                 "caches.\"}], "
                 "\"max_tokens\": 64}'\n";
  }
  std::cout << "\nStop: " << (detached ? "" : "Ctrl-C, or ") << down_command << "\n" << std::endl;
}

// "build/src/cli/tandem down deploy/local.json": the binary as a path relative to the
// working directory when it lies below it, so that the line can be pasted.
std::string DownCommand(const cluster::ClusterSpec& spec, const UpFlags& f,
                        const std::string& node) {
  std::error_code ec;
  std::filesystem::path binary = SelfBinary();
  const std::filesystem::path relative =
      std::filesystem::relative(binary, std::filesystem::current_path(ec), ec);
  if (!ec && !relative.empty() && *relative.begin() != "..") binary = relative;
  if (binary.parent_path().empty()) binary = "./" / binary;
  std::string command = binary.string() + " down " + f.file;
  if (spec.nodes.size() > 1) command += " --node " + node;
  if (!f.run_dir.empty()) command += " --run-dir " + f.run_dir;
  return command;
}

int RunUp(const UpFlags& f) {
  StatusOr<cluster::ClusterSpec> spec = cluster::LoadClusterSpec(f.file);
  if (!spec.ok()) return ReportError(spec.status());
  StatusOr<std::string> node = ChooseNode(*spec, f.node);
  if (!node.ok()) return ReportError(node.status());
  StatusOr<cluster::NodePlan> plan = cluster::PlanNode(*spec, *node, {SelfBinary(), f.run_dir});
  if (!plan.ok()) return ReportError(InvalidArgumentError(f.file + ": " + plan.status().message()));
  if (f.dry_run) {
    for (const cluster::RemoteDependency& d : plan->remote) {
      std::cout << "# wait for " << d.name << ": " << d.ready.Describe() << "\n";
    }
    for (const cluster::ServicePlan& s : plan->services) {
      std::cout << "# " << s.name << " (log " << s.log_path << "; ready: " << s.ready.Describe()
                << ")\n";
      for (const std::string& e : s.env) std::cout << cluster::ShellQuote({e}) << " ";
      std::cout << cluster::ShellQuote(s.argv) << "\n";
    }
    return 0;
  }
  if (Status s = cluster::CheckNodeNotRunning(plan->state_path); !s.ok()) return ReportError(s);
  if (Status s = cluster::CheckPortsFree(*plan); !s.ok()) return ReportError(s);
  cluster::UpOptions options;
  options.stop_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.stop_timeout_s * 1000));
  const cluster::NodePlan& p = *plan;
  const std::string down = DownCommand(*spec, f, *node);
  const bool detach = f.detach;
  options.on_ready = [&p, down, detach](const cluster::ClusterState& state) {
    PrintReady(p, state, down, detach);
  };
  return f.detach ? cluster::RunNodeDetached(*plan, options) : cluster::RunNode(*plan, options);
}

int RunDown(const DownFlags& f) {
  StatusOr<cluster::ClusterSpec> spec = cluster::LoadClusterSpec(f.file);
  if (!spec.ok()) return ReportError(spec.status());
  std::vector<std::string> nodes;
  if (!f.node.empty()) {
    if (spec->FindNode(f.node) == nullptr) {
      return ReportError(InvalidArgumentError(f.file + ": no node named \"" + f.node + "\""));
    }
    nodes.push_back(f.node);
  } else {
    for (const cluster::NodeSpec& n : spec->nodes) nodes.push_back(n.name);
  }
  cluster::StopOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  int code = 0;
  int found = 0;
  for (const std::string& node : nodes) {
    const std::string state_path = cluster::NodeDir(*spec, node, f.run_dir) + "/state.json";
    StatusOr<cluster::ClusterState> state = cluster::ReadClusterState(state_path);
    if (!state.ok()) {
      if (state.status().code() == StatusCode::kNotFound) continue;
      std::cerr << "tandem down: " << state.status().message() << "\n";
      code = 1;
      continue;
    }
    ++found;
    if (Status s = cluster::StopNode(*state, options, std::cout); !s.ok()) {
      std::cerr << "tandem down: " << s.message() << "\n";
      code = 1;
      continue;
    }
    std::remove(state_path.c_str());
  }
  if (found == 0 && code == 0) {
    std::cout << "nothing to stop: no state file under " << cluster::NodeDir(*spec, "", f.run_dir)
              << std::endl;
  }
  return code;
}

}  // namespace

void RegisterUp(CLI::App& app, RunFn* run) {
  auto f = std::make_shared<UpFlags>();
  CLI::App* cmd = app.add_subcommand("up",
                                     "start this host's node of a cluster file (etcd, pool worker, "
                                     "engines, proxy) and supervise it");
  cmd->add_option("file", f->file, "cluster description file (JSON, docs/DEPLOY.md)")
      ->capture_default_str();
  cmd->add_option("--node", f->node, "the node to start (default: the file's only node)");
  cmd->add_option("--run-dir", f->run_dir,
                  "state, logs and data directory (default: the file's run_dir)");
  cmd->add_flag("--detach,-d", f->detach,
                "return once the node is ready; it keeps running in the background");
  cmd->add_flag("--dry-run", f->dry_run, "print the services' command lines and exit");
  cmd->add_option("--stop-timeout", f->stop_timeout_s,
                  "seconds between the stop signal and SIGKILL")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->callback([f, run] { *run = [f] { return RunUp(*f); }; });
}

void RegisterDown(CLI::App& app, RunFn* run) {
  auto f = std::make_shared<DownFlags>();
  CLI::App* cmd = app.add_subcommand(
      "down", "stop what tandem up started for a cluster file (from its state files)");
  cmd->add_option("file", f->file, "cluster description file (JSON, docs/DEPLOY.md)")
      ->capture_default_str();
  cmd->add_option("--node", f->node, "only this node (default: every node with a state file here)");
  cmd->add_option("--run-dir", f->run_dir, "as given to tandem up");
  cmd->add_option("--timeout", f->timeout_s, "seconds between SIGTERM and SIGKILL")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->callback([f, run] { *run = [f] { return RunDown(*f); }; });
}

}  // namespace tandem::cli
