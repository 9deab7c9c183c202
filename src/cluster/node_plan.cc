#include "cluster/node_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tandem::cluster {
namespace {

using nlohmann::json;

enum Level { kEtcdLevel = 0, kPoolLevel = 1, kEngineLevel = 2, kProxyLevel = 3 };

// Where to probe a service that binds `host`: a wildcard bind is reached on loopback.
std::string ProbeHost(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "::" || host == "[::]") return "::1";
  return host;
}

// "[::1]:8000" for IPv6 literals, "10.0.0.1:8000" otherwise.
std::string HostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

ReadinessCheck HttpCheck(const std::string& host, int port, std::string path,
                         std::string body_contains, int timeout_s) {
  ReadinessCheck check;
  check.kind = ReadinessCheck::Kind::kHttp;
  check.host = ProbeHost(host);
  check.port = port;
  check.path = std::move(path);
  check.body_contains = std::move(body_contains);
  check.timeout_s = timeout_s;
  return check;
}

std::string EtcdUrl(const std::string& host, int port) { return "http://" + HostPort(host, port); }

ServicePlan PlanEtcd(const ClusterSpec& spec, const std::string& node_dir) {
  const EtcdSpec& e = *spec.etcd;
  const std::string data_dir = e.data_dir.empty() ? node_dir + "/etcd" : e.data_dir;
  const std::string client = EtcdUrl(e.host, e.client_port);
  const std::string peer = EtcdUrl(e.host, e.peer_port);
  ServicePlan s;
  s.name = "etcd";
  s.kind = ServiceKind::kEtcd;
  s.level = kEtcdLevel;
  s.argv = {e.binary,
            "--name",
            e.node,
            "--data-dir",
            data_dir,
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            e.node + "=" + peer};
  s.argv.insert(s.argv.end(), e.args.begin(), e.args.end());
  s.bind_host = e.host;
  s.ports = {{"client", e.client_port}, {"peer", e.peer_port}};
  // etcd 3.4 answers {"health":"true"} once it has a leader.
  s.ready = HttpCheck(e.host, e.client_port, "/health", "\"health\":\"true\"", e.ready_timeout_s);
  s.make_dirs = {data_dir};
  return s;
}

ServicePlan PlanPool(const ClusterSpec& spec, const NodeSpec& node, const std::string& tandem,
                     const std::string& node_dir) {
  const PoolSpec& p = *spec.pool;
  const std::string pool_dir = node_dir + "/pool";
  const std::string liveness =
      p.liveness_check_path.empty() ? pool_dir + "/liveness" : p.liveness_check_path;
  ServicePlan s;
  s.name = "pool";
  s.kind = ServiceKind::kPool;
  s.level = kPoolLevel;
  s.argv = {tandem,
            "pool",
            "run",
            "--worker_address",
            HostPort(node.host, p.port),
            "--etcd_address",
            HostPort(spec.etcd->host, spec.etcd->client_port),
            "--shared_memory_size_mb",
            std::to_string(p.shared_memory_size_mb),
            "--node_timeout_s",
            std::to_string(p.node_timeout_s),
            "--node_dead_timeout_s",
            std::to_string(p.node_dead_timeout_s),
            "--liveness_check_path",
            liveness};
  s.argv.insert(s.argv.end(), p.args.begin(), p.args.end());
  s.env = {"TANDEM_POOL_RUN_DIR=" + pool_dir};  // its pid file, not the machine-wide /tmp one
  s.bind_host = node.host;
  s.ports = {{"worker", p.port}, {"metrics", p.port + 1}};
  s.ready.kind = ReadinessCheck::Kind::kLivenessFile;
  s.ready.file = liveness;
  s.ready.timeout_s = p.ready_timeout_s;
  s.make_dirs = {pool_dir};
  s.remove_files = {liveness};  // an old file would read as ready
  return s;
}

// Prefill and decode sizes over the whole cluster (the transfer connector's
// kv_connector_extra_config.prefill / .decode).
json ParallelSizes(const ClusterSpec& spec, EngineRole role) {
  int dp = 1;
  int tp = 1;
  for (const NodeSpec& node : spec.nodes) {
    for (const EngineSpec& e : node.engines) {
      if (e.role != role) continue;
      dp = std::max(dp, e.data_parallel_size);
      tp = std::max(tp, e.tensor_parallel_size);
    }
  }
  return json{{"dp_size", dp}, {"tp_size", tp}};
}

std::vector<ServicePlan> PlanEngines(const ClusterSpec& spec, const NodeSpec& node,
                                     const EngineSpec& e, const std::string& tandem,
                                     const std::string& logs_dir) {
  std::vector<ServicePlan> out;
  for (int i = 0; i < e.ranks; ++i) {
    const int port = e.port + i;
    const int dp_rank = e.data_parallel_rank_start + i;
    ServicePlan s;
    s.name = e.ranks > 1 ? e.name + "-" + std::to_string(i) : e.name;
    s.kind = ServiceKind::kEngine;
    s.level = kEngineLevel;
    s.argv = {tandem,
              "serve",
              e.model,
              "--host",
              e.host,
              "--port",
              std::to_string(port),
              "--served-model-name",
              e.served_model_name};
    if (e.data_parallel_size > 1) {
      s.argv.insert(
          s.argv.end(),
          {"--data-parallel-size", std::to_string(e.data_parallel_size), "--data-parallel-rank",
           std::to_string(dp_rank), "--data-parallel-address", e.data_parallel_address,
           "--data-parallel-rpc-port", std::to_string(e.data_parallel_rpc_port)});
    }
    if (e.tensor_parallel_size > 1) {
      s.argv.insert(s.argv.end(),
                    {"--tensor-parallel-size", std::to_string(e.tensor_parallel_size)});
    }
    if (!e.cpu_affinity.empty()) s.argv.insert(s.argv.end(), {"--cpu-affinity", e.cpu_affinity[i]});
    if (e.threads > 0) s.argv.insert(s.argv.end(), {"--threads", std::to_string(e.threads)});
    s.argv.insert(s.argv.end(), spec.engine_args.begin(), spec.engine_args.end());
    s.argv.insert(s.argv.end(), e.args.begin(), e.args.end());
    s.argv.insert(s.argv.end(), {"--kv-transfer-config", EngineKvTransferConfig(spec, e, i)});
    if (node.pool) s.env.push_back("DS_WORKER_ADDR=" + HostPort(node.host, spec.pool->port));
    for (const auto& [name, value] : e.env) s.env.push_back(name + "=" + value);
    s.bind_host = e.host;
    s.ports = {{"http", port}, {"kv", e.kv_port + dp_rank * e.tensor_parallel_size}};
    s.ready = HttpCheck(e.host, port, "/health", "", e.ready_timeout_s);
    s.ready.api_key_env = "VLLM_API_KEY";
    s.log_path = logs_dir + "/" + s.name + ".log";
    out.push_back(std::move(s));
  }
  return out;
}

ServicePlan PlanProxy(const ClusterSpec& spec, const std::string& tandem) {
  const ProxySpec& p = *spec.proxy;
  std::vector<std::string> p_hosts, p_ports, d_hosts, d_ports;
  for (const NodeSpec& node : spec.nodes) {
    for (const EngineSpec& e : node.engines) {
      for (int i = 0; i < e.ranks; ++i) {
        // The proxy reaches a wildcard-bound engine at its node's address.
        const std::string host = e.host == "0.0.0.0" || e.host == "::" ? node.host : e.host;
        (e.role == EngineRole::kPrefill ? p_hosts : d_hosts).push_back(host);
        (e.role == EngineRole::kPrefill ? p_ports : d_ports).push_back(std::to_string(e.port + i));
      }
    }
  }
  ServicePlan s;
  s.name = "proxy";
  s.kind = ServiceKind::kProxy;
  s.level = kProxyLevel;
  s.argv = {
      tandem, "proxy", "--host", p.host, "--port", std::to_string(p.port), "--prefiller-hosts"};
  s.argv.insert(s.argv.end(), p_hosts.begin(), p_hosts.end());
  s.argv.push_back("--prefiller-ports");
  s.argv.insert(s.argv.end(), p_ports.begin(), p_ports.end());
  s.argv.push_back("--decoder-hosts");
  s.argv.insert(s.argv.end(), d_hosts.begin(), d_hosts.end());
  s.argv.push_back("--decoder-ports");
  s.argv.insert(s.argv.end(), d_ports.begin(), d_ports.end());
  s.argv.insert(s.argv.end(), p.args.begin(), p.args.end());
  s.bind_host = p.host;
  s.ports = {{"http", p.port}};
  s.ready = HttpCheck(p.host, p.port, "/health", "\"ok\"", p.ready_timeout_s);
  s.ready.api_key_env = "VLLM_API_KEY";
  return s;
}

}  // namespace

const char* ServiceKindName(ServiceKind kind) {
  switch (kind) {
    case ServiceKind::kEtcd:
      return "etcd";
    case ServiceKind::kPool:
      return "pool";
    case ServiceKind::kEngine:
      return "engine";
    case ServiceKind::kProxy:
      return "proxy";
  }
  return "?";
}

std::string ReadinessCheck::Describe() const {
  if (kind == Kind::kLivenessFile) return "liveness file " + file;
  return "GET http://" + HostPort(host, port) + path;
}

std::string NodeDir(const ClusterSpec& spec, const std::string& node,
                    const std::string& run_dir_override) {
  return (run_dir_override.empty() ? spec.run_dir : run_dir_override) + "/" + node;
}

std::string EngineKvTransferConfig(const ClusterSpec& spec, const EngineSpec& e, int local_rank) {
  if (!e.kv_transfer_config.empty()) return e.kv_transfer_config;
  const std::string role = e.role == EngineRole::kPrefill ? "kv_producer" : "kv_consumer";
  json transfer = {{"kv_connector", "MooncakeConnectorV1"},
                   {"kv_role", role},
                   {"kv_port", std::to_string(e.kv_port)},
                   {"kv_connector_extra_config",
                    {{"prefill", ParallelSizes(spec, EngineRole::kPrefill)},
                     {"decode", ParallelSizes(spec, EngineRole::kDecode)}}}};
  if (!e.kv_pool.value_or(false)) {
    transfer["engine_id"] = e.engine_id;
    return transfer.dump();
  }
  // Seed 000's layout: the transfer connector first, then the pool (lookup_rpc_port:
  // the rank, so that ranks of one node do not collide).
  json pool = {{"kv_connector", "AscendStoreConnector"},
               {"kv_role", role},
               {"kv_connector_extra_config",
                {{"lookup_rpc_port", std::to_string(e.data_parallel_rank_start + local_rank)},
                 {"backend", "yuanrong"}}}};
  json multi = {{"kv_connector", "MultiConnector"},
                {"kv_role", role},
                {"engine_id", e.engine_id},
                {"kv_connector_extra_config", {{"connectors", json::array({transfer, pool})}}}};
  return multi.dump();
}

StatusOr<NodePlan> PlanNode(const ClusterSpec& spec, const std::string& node_name,
                            const PlanOptions& options) {
  const NodeSpec* node = spec.FindNode(node_name);
  if (node == nullptr) {
    std::string names;
    for (const NodeSpec& n : spec.nodes) names += (names.empty() ? "" : ", ") + n.name;
    return NotFoundError("no node named \"" + node_name +
                         "\" in the cluster file (nodes: " + names + ")");
  }
  const std::string tandem = spec.tandem.empty() ? options.tandem_binary : spec.tandem;
  NodePlan plan;
  plan.cluster = spec.name;
  plan.node = node->name;
  plan.node_dir = NodeDir(spec, node->name, options.run_dir);
  plan.logs_dir = plan.node_dir + "/logs";
  plan.state_path = plan.node_dir + "/state.json";
  plan.served_model_name = spec.served_model_name;

  if (spec.etcd && spec.etcd->node == node->name) {
    plan.services.push_back(PlanEtcd(spec, plan.node_dir));
  } else if (spec.etcd && node->pool) {
    plan.remote.push_back({"etcd on " + spec.etcd->node, kPoolLevel,
                           HttpCheck(spec.etcd->host, spec.etcd->client_port, "/health",
                                     "\"health\":\"true\"", spec.etcd->ready_timeout_s)});
  }
  if (node->pool) plan.services.push_back(PlanPool(spec, *node, tandem, plan.node_dir));
  for (const EngineSpec& e : node->engines) {
    for (ServicePlan& s : PlanEngines(spec, *node, e, tandem, plan.logs_dir))
      plan.services.push_back(std::move(s));
  }
  for (auto it = spec.nodes.rbegin(); it != spec.nodes.rend();
       ++it) {  // the first engine's name wins
    if (!it->engines.empty()) plan.served_model_name = it->engines.front().served_model_name;
  }
  if (spec.proxy && spec.proxy->node == node->name) {
    plan.services.push_back(PlanProxy(spec, tandem));
    plan.proxy_url = "http://" + HostPort(ProbeHost(spec.proxy->host), spec.proxy->port);
  }
  for (ServicePlan& s : plan.services) {
    if (s.log_path.empty()) s.log_path = plan.logs_dir + "/" + s.name + ".log";
  }
  return plan;
}

std::string ShellQuote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./:=,@+%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace tandem::cluster
