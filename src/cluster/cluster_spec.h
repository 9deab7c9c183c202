// ClusterSpec: the cluster description file of `tandem up` / `tandem down` (JSON),
// parsed and validated. One file describes a whole deployment — the local one-machine
// cluster or many hosts — and each host starts its own part with `--node NAME`.
// docs/DEPLOY.md documents every field; deploy/local.json is the default.
//
// Validation is strict: an unknown field, a wrong type, a value out of range, a
// reference to a node that does not exist or two services on one host:port is an
// InvalidArgument whose message starts with the JSON path of the field
// ("nodes[1].engines[0].role: expected \"prefill\" or \"decode\", got \"x\"").
//
// Paths in the file (run_dir, model, data dirs) are used as written: relative ones are
// relative to the directory `tandem up` runs in.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::cluster {

// The etcd server (one member) that the pool workers share.
struct EtcdSpec {
  std::string node;  // the node that runs it
  std::string host;  // bind + advertised address (default: that node's host)
  int client_port = 2379;
  int peer_port = 2380;
  std::string binary = "etcd";
  std::string data_dir;  // default: <run_dir>/<node>/etcd
  std::vector<std::string> args;
  int ready_timeout_s = 30;
};

// One pool worker per node (`tandem pool run`); settings shared by all nodes.
struct PoolSpec {
  int port = 31501;  // worker port; its /metrics listens on port + 1
  int shared_memory_size_mb = 1024;
  int node_timeout_s = 30;
  int node_dead_timeout_s = 60;
  std::string liveness_check_path;  // default: <run_dir>/<node>/pool/liveness
  std::vector<std::string> args;
  int ready_timeout_s = 30;
};

enum class EngineRole { kPrefill, kDecode };
const char* EngineRoleName(EngineRole role);

// A group of `tandem serve` data-parallel ranks on one node (what a vllm-ascend
// deployment starts with launch_online_dp.py; docs/DEPLOY.md): local rank i listens on port + i and is global rank
// data_parallel_rank_start + i.
struct EngineSpec {
  std::string name;  // default: the role ("prefill", "decode"); unique on its node
  EngineRole role = EngineRole::kPrefill;
  std::string host;  // bind + advertised address (default: the node's host)
  int port = 0;
  int ranks = 1;               // local DP ranks (--dp-size-local)
  int data_parallel_size = 0;  // all ranks of the group's DP set (default: ranks)
  int data_parallel_rank_start = 0;
  std::string data_parallel_address;  // default: host
  int data_parallel_rpc_port = 10521;
  int tensor_parallel_size = 1;
  int kv_port = 30000;    // transfer server base port (the engine adds dp_rank * tp_size)
  std::string engine_id;  // default: "<node>-<name>"
  std::vector<std::string> cpu_affinity;  // one core list per local rank, e.g. "0" or "4-7"
  int threads = 0;                        // --threads; 0 = not passed
  std::string model;                      // default: the cluster's
  std::string served_model_name;          // default: the cluster's
  std::optional<bool> kv_pool;            // MultiConnector with the pool (default: node has one)
  std::string kv_transfer_config;         // verbatim JSON; replaces the generated one
  std::vector<std::string> args;          // extra `tandem serve` flags
  std::map<std::string, std::string> env;
  int ready_timeout_s = 600;
};

struct ProxySpec {
  std::string node;
  std::string host;  // default: that node's host
  int port = 8000;
  std::vector<std::string> args;
  int ready_timeout_s = 30;
};

struct NodeSpec {
  std::string name;
  std::string host;  // the address other nodes reach this one at; services bind to it
  bool pool = true;  // runs a pool worker (only when the cluster has a "pool" section)
  std::vector<EngineSpec> engines;
};

struct ClusterSpec {
  std::string name = "tandem";
  std::string run_dir;  // default: ".tandem/<name>"
  std::string tandem;   // the tandem binary for the services (default: the running one)
  std::string model = "models/default.gguf";
  std::string served_model_name = "default";
  std::vector<std::string> engine_args;  // flags added to every engine
  std::optional<EtcdSpec> etcd;
  std::optional<PoolSpec> pool;
  std::optional<ProxySpec> proxy;
  std::vector<NodeSpec> nodes;

  // nullptr when there is no node of that name.
  const NodeSpec* FindNode(const std::string& name) const;
};

// Parses and validates `json_text`. Defaults are filled in (host, names, run_dir, ...).
StatusOr<ClusterSpec> ParseClusterSpec(const std::string& json_text);

// Reads and parses a file; the message of every error starts with the path.
StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path);

}  // namespace tandem::cluster
