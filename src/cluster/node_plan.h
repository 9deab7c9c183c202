// NodePlan: what `tandem up --node NAME` runs on one node of a ClusterSpec — each
// service's command line, environment, log file, ports and readiness check, in start
// order — and where the node keeps its state. Pure: it starts nothing, so the command
// lines can be checked by unit tests and printed by `tandem up --dry-run`.
//
// Start order (the `level` of a service): etcd (0) -> pool worker (1) -> engines (2) ->
// proxy (3). Services of one level start together; the next level starts when all of
// them are ready. Stopping goes the other way (the level is the stop stage).
//
// Files of a node, under <run_dir>/<node>/: state.json (ClusterState), logs/<service>.log,
// etcd/ (etcd's data dir unless set), pool/ (the pool worker's pid file and default
// liveness file).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "common/status.h"

namespace tandem::cluster {

enum class ServiceKind { kEtcd, kPool, kEngine, kProxy };
const char* ServiceKindName(ServiceKind kind);

// How to tell that a service is ready.
struct ReadinessCheck {
  enum class Kind { kHttp, kLivenessFile };
  Kind kind = Kind::kHttp;
  // kHttp: GET http://host:port/path answers 200 and its body contains body_contains.
  std::string host;
  int port = 0;
  std::string path = "/health";
  std::string body_contains;
  // When this variable is set in `tandem up`'s environment, the GET carries
  // "Authorization: Bearer $VAR" (engines and the proxy inherit VLLM_API_KEY and then
  // guard /health with it). The key itself never enters the plan or the state file.
  std::string api_key_env;
  // kLivenessFile: the pool worker's liveness file says "liveness check success".
  std::string file;
  int timeout_s = 30;  // give up (and stop the node) after this long

  std::string Describe() const;  // "GET http://127.0.0.1:2379/health" or "liveness file F"
};

struct ServicePlan {
  std::string name;  // unique on the node: "etcd", "pool", "prefill", "decode-1", "proxy"
  ServiceKind kind = ServiceKind::kEngine;
  int level = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, added to tandem up's environment
  std::string log_path;
  std::string bind_host;             // the address its ports are bound on
  std::map<std::string, int> ports;  // "http", "kv", "client", "peer", "metrics", "worker"
  ReadinessCheck ready;
  std::vector<std::string> make_dirs;     // created before the start
  std::vector<std::string> remove_files;  // removed before the start (a stale liveness file)
};

// A service of another node that this node's level `before_level` needs (the pool
// workers need etcd).
struct RemoteDependency {
  std::string name;
  int before_level = 0;
  ReadinessCheck ready;
};

struct NodePlan {
  std::string cluster;
  std::string node;
  std::string node_dir;               // <run_dir>/<node>
  std::string logs_dir;               // <node_dir>/logs
  std::string state_path;             // <node_dir>/state.json
  std::vector<ServicePlan> services;  // in start order (by level)
  std::vector<RemoteDependency> remote;
  std::string proxy_url;          // "http://host:port" when the proxy runs here
  std::string served_model_name;  // of the first engine (for the sample request)
};

struct PlanOptions {
  std::string tandem_binary;  // used when the spec names none
  std::string run_dir;        // overrides the spec's run_dir when set
};

// The node's run directory (<run_dir>/<node>): where its state file lives.
std::string NodeDir(const ClusterSpec& spec, const std::string& node,
                    const std::string& run_dir_override);

// NotFound when the spec has no such node.
StatusOr<NodePlan> PlanNode(const ClusterSpec& spec, const std::string& node,
                            const PlanOptions& options);

// The --kv-transfer-config JSON for local rank `local_rank` of `engine` (vllm-ascend's
// MooncakeConnectorV1 config, docs/DEPLOY.md "The cluster file", wrapped in MultiConnector with the pool connector when
// engine.kv_pool), unless the engine sets its own.
std::string EngineKvTransferConfig(const ClusterSpec& spec, const EngineSpec& engine,
                                   int local_rank);

// `argv` as one shell-quoted line (for --dry-run and logs).
std::string ShellQuote(const std::vector<std::string>& argv);

}  // namespace tandem::cluster
