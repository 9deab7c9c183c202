#include "cluster/cluster_spec.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace tandem::cluster {
namespace {

using nlohmann::json;

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const char* TypeName(const json& j) { return j.type_name(); }

// Reads the fields of one JSON object, remembering the first error (with its path) and
// which keys were read, so that Finish() can reject unknown ones (typos).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) {
      Fail(path_.empty() ? "the cluster file" : path_,
           std::string("expected an object, got ") + TypeName(object_));
    }
  }

  const std::string& path() const { return path_; }
  bool ok() const { return status_.ok(); }

  // nullptr when absent (or after an error).
  const json* Find(const std::string& key) {
    if (!ok()) return nullptr;
    known_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  void Required(const std::string& key) {
    if (ok() && object_.find(key) == object_.end())
      Fail(Join(path_, key), "required field missing");
  }

  void String(const std::string& key, std::string* out) {
    const json* j = Find(key);
    if (j == nullptr) return;
    if (!j->is_string() || j->get<std::string>().empty()) {
      Fail(Join(path_, key), std::string("expected a non-empty string, got ") + j->dump());
      return;
    }
    *out = j->get<std::string>();
  }

  void Int(const std::string& key, int* out, int min, int max) {
    const json* j = Find(key);
    if (j == nullptr) return;
    if (!j->is_number_integer() || j->get<int64_t>() < min || j->get<int64_t>() > max) {
      Fail(Join(path_, key), "expected an integer in " + std::to_string(min) + ".." +
                                 std::to_string(max) + ", got " + j->dump());
      return;
    }
    *out = static_cast<int>(j->get<int64_t>());
  }

  void Port(const std::string& key, int* out) { Int(key, out, 1, 65535); }

  void Bool(const std::string& key, bool* out) {
    const json* j = Find(key);
    if (j == nullptr) return;
    if (!j->is_boolean()) {
      Fail(Join(path_, key), "expected true or false, got " + j->dump());
      return;
    }
    *out = j->get<bool>();
  }

  void OptionalBool(const std::string& key, std::optional<bool>* out) {
    bool value = false;
    if (Find(key) == nullptr) return;
    Bool(key, &value);
    if (ok()) *out = value;
  }

  void StringList(const std::string& key, std::vector<std::string>* out) {
    const json* j = Find(key);
    if (j == nullptr) return;
    if (!j->is_array()) {
      Fail(Join(path_, key), std::string("expected an array of strings, got ") + TypeName(*j));
      return;
    }
    out->clear();
    for (size_t i = 0; i < j->size(); ++i) {
      const json& item = (*j)[i];
      if (!item.is_string()) {
        Fail(Index(Join(path_, key), i), std::string("expected a string, got ") + item.dump());
        return;
      }
      out->push_back(item.get<std::string>());
    }
  }

  void StringMap(const std::string& key, std::map<std::string, std::string>* out) {
    const json* j = Find(key);
    if (j == nullptr) return;
    if (!j->is_object()) {
      Fail(Join(path_, key), std::string("expected an object of strings, got ") + TypeName(*j));
      return;
    }
    for (const auto& [name, value] : j->items()) {
      if (!value.is_string()) {
        Fail(Join(Join(path_, key), name), "expected a string, got " + value.dump());
        return;
      }
      (*out)[name] = value.get<std::string>();
    }
  }

  // An object or a JSON string holding one, kept as compact JSON text.
  void JsonText(const std::string& key, std::string* out) {
    const json* j = Find(key);
    if (j == nullptr) return;
    json value = j->is_string() ? json::parse(j->get<std::string>(), nullptr, false) : *j;
    if (!value.is_object()) {
      Fail(Join(path_, key), "expected a JSON object (or a string holding one)");
      return;
    }
    *out = value.dump();
  }

  void Fail(const std::string& field, const std::string& message) {
    if (ok()) status_ = InvalidArgumentError(field + ": " + message);
  }
  void Fail(Status status) {
    if (ok()) status_ = std::move(status);
  }

  Status Finish() {
    if (!ok()) return status_;
    for (const auto& [key, value] : object_.items()) {
      if (!known_.count(key)) return InvalidArgumentError(Join(path_, key) + ": unknown field");
    }
    return Status::Ok();
  }

 private:
  const json& object_;
  std::string path_;
  std::set<std::string> known_;
  Status status_;
};

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return s != "." && s != "..";
}

// "0", "0,2", "4-7", "0-3,8": what `tandem serve --cpu-affinity` takes.
bool IsCpuList(const std::string& s) {
  std::stringstream in(s);
  std::string part;
  int parts = 0;
  while (std::getline(in, part, ',')) {
    const size_t dash = part.find('-');
    auto digits = [](const std::string& d) {
      return !d.empty() && d.size() <= 5 && d.find_first_not_of("0123456789") == std::string::npos;
    };
    if (dash == std::string::npos
            ? !digits(part)
            : !digits(part.substr(0, dash)) || !digits(part.substr(dash + 1))) {
      return false;
    }
    ++parts;
  }
  return parts > 0 && s.back() != ',';
}

Status ReadEtcd(const json& j, EtcdSpec* etcd) {
  ObjectReader r(j, "etcd");
  r.Required("node");
  r.String("node", &etcd->node);
  r.String("host", &etcd->host);
  r.Port("client_port", &etcd->client_port);
  r.Port("peer_port", &etcd->peer_port);
  r.String("binary", &etcd->binary);
  r.String("data_dir", &etcd->data_dir);
  r.StringList("args", &etcd->args);
  r.Int("ready_timeout_s", &etcd->ready_timeout_s, 1, 86400);
  return r.Finish();
}

Status ReadPool(const json& j, PoolSpec* pool) {
  ObjectReader r(j, "pool");
  r.Int("port", &pool->port, 1, 65534);  // + 1 for /metrics
  r.Int("shared_memory_size_mb", &pool->shared_memory_size_mb, 1, 16 << 20);
  r.Int("node_timeout_s", &pool->node_timeout_s, 1, 86400);
  r.Int("node_dead_timeout_s", &pool->node_dead_timeout_s, 1, 86400);
  r.String("liveness_check_path", &pool->liveness_check_path);
  r.StringList("args", &pool->args);
  r.Int("ready_timeout_s", &pool->ready_timeout_s, 1, 86400);
  return r.Finish();
}

Status ReadProxy(const json& j, ProxySpec* proxy) {
  ObjectReader r(j, "proxy");
  r.Required("node");
  r.String("node", &proxy->node);
  r.String("host", &proxy->host);
  r.Port("port", &proxy->port);
  r.StringList("args", &proxy->args);
  r.Int("ready_timeout_s", &proxy->ready_timeout_s, 1, 86400);
  return r.Finish();
}

Status ReadEngine(const json& j, const std::string& path, EngineSpec* e) {
  ObjectReader r(j, path);
  r.Required("role");
  r.Required("port");
  std::string role;
  r.String("role", &role);
  if (r.ok()) {
    if (role == "prefill") {
      e->role = EngineRole::kPrefill;
    } else if (role == "decode") {
      e->role = EngineRole::kDecode;
    } else {
      r.Fail(Join(path, "role"), "expected \"prefill\" or \"decode\", got \"" + role + "\"");
    }
  }
  r.String("name", &e->name);
  r.String("host", &e->host);
  r.Port("port", &e->port);
  r.Int("ranks", &e->ranks, 1, 256);
  r.Int("data_parallel_size", &e->data_parallel_size, 1, 4096);
  r.Int("data_parallel_rank_start", &e->data_parallel_rank_start, 0, 4095);
  r.String("data_parallel_address", &e->data_parallel_address);
  r.Port("data_parallel_rpc_port", &e->data_parallel_rpc_port);
  r.Int("tensor_parallel_size", &e->tensor_parallel_size, 1, 1024);
  r.Port("kv_port", &e->kv_port);
  r.String("engine_id", &e->engine_id);
  r.StringList("cpu_affinity", &e->cpu_affinity);
  r.Int("threads", &e->threads, 0, 4096);
  r.String("model", &e->model);
  r.String("served_model_name", &e->served_model_name);
  r.OptionalBool("kv_pool", &e->kv_pool);
  r.JsonText("kv_transfer_config", &e->kv_transfer_config);
  r.StringList("args", &e->args);
  r.StringMap("env", &e->env);
  r.Int("ready_timeout_s", &e->ready_timeout_s, 1, 86400);
  TANDEM_RETURN_IF_ERROR(r.Finish());

  if (e->name.empty()) e->name = EngineRoleName(e->role);
  if (!IsName(e->name)) {
    return InvalidArgumentError(Join(path, "name") + ": \"" + e->name +
                                "\" is not a name (letters, digits, - _ .)");
  }
  if (e->data_parallel_size == 0) e->data_parallel_size = e->ranks;
  if (e->data_parallel_rank_start + e->ranks > e->data_parallel_size) {
    return InvalidArgumentError(
        Join(path, "ranks") + ": ranks " + std::to_string(e->data_parallel_rank_start) + ".." +
        std::to_string(e->data_parallel_rank_start + e->ranks - 1) +
        " do not fit in data_parallel_size " + std::to_string(e->data_parallel_size));
  }
  if (e->port + e->ranks - 1 > 65535) {
    return InvalidArgumentError(Join(path, "port") + ": port + ranks - 1 is over 65535");
  }
  if (!e->cpu_affinity.empty() && static_cast<int>(e->cpu_affinity.size()) != e->ranks) {
    return InvalidArgumentError(Join(path, "cpu_affinity") + ": expected one core list per rank (" +
                                std::to_string(e->ranks) + "), got " +
                                std::to_string(e->cpu_affinity.size()));
  }
  for (size_t i = 0; i < e->cpu_affinity.size(); ++i) {
    if (!IsCpuList(e->cpu_affinity[i])) {
      return InvalidArgumentError(Index(Join(path, "cpu_affinity"), i) + ": \"" +
                                  e->cpu_affinity[i] +
                                  "\" is not a core list (e.g. \"0\", \"0,2\", \"4-7\")");
    }
  }
  for (const auto& [name, value] : e->env) {
    if (!IsName(name) || name.find('.') != std::string::npos ||
        name.find('-') != std::string::npos) {
      return InvalidArgumentError(Join(Join(path, "env"), name) +
                                  ": not an environment variable name");
    }
  }
  return Status::Ok();
}

Status ReadNode(const json& j, const std::string& path, NodeSpec* node) {
  ObjectReader r(j, path);
  r.Required("name");
  r.Required("host");
  r.String("name", &node->name);
  r.String("host", &node->host);
  r.Bool("pool", &node->pool);
  const json* engines = r.Find("engines");
  TANDEM_RETURN_IF_ERROR(r.Finish());
  if (!IsName(node->name)) {
    return InvalidArgumentError(Join(path, "name") + ": \"" + node->name +
                                "\" is not a name (letters, digits, - _ .)");
  }
  if (engines == nullptr) return Status::Ok();
  const std::string engines_path = Join(path, "engines");
  if (!engines->is_array()) {
    return InvalidArgumentError(engines_path + ": expected an array, got " + TypeName(*engines));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < engines->size(); ++i) {
    EngineSpec e;
    TANDEM_RETURN_IF_ERROR(ReadEngine((*engines)[i], Index(engines_path, i), &e));
    if (!names.insert(e.name).second) {
      return InvalidArgumentError(Index(engines_path, i) + ".name: \"" + e.name +
                                  "\" is used by another engine group of this node (set \"name\")");
    }
    node->engines.push_back(std::move(e));
  }
  return Status::Ok();
}

// Two services on one host:port: the second one's field is named.
class PortTable {
 public:
  Status Claim(const std::string& host, int port, const std::string& field) {
    auto [it, inserted] = used_.emplace(host + ":" + std::to_string(port), field);
    if (inserted) return Status::Ok();
    return InvalidArgumentError(field + ": port " + std::to_string(port) + " on " + host +
                                " is also used by " + it->second);
  }

 private:
  std::map<std::string, std::string> used_;
};

Status Resolve(ClusterSpec* spec) {
  if (spec->nodes.empty()) return InvalidArgumentError("nodes: at least one node is required");
  std::set<std::string> names;
  for (size_t i = 0; i < spec->nodes.size(); ++i) {
    if (!names.insert(spec->nodes[i].name).second) {
      return InvalidArgumentError(Index("nodes", i) + ".name: \"" + spec->nodes[i].name +
                                  "\" names two nodes");
    }
  }
  if (spec->run_dir.empty()) spec->run_dir = ".tandem/" + spec->name;
  PortTable ports;
  if (spec->etcd) {
    const NodeSpec* node = spec->FindNode(spec->etcd->node);
    if (node == nullptr) {
      return InvalidArgumentError("etcd.node: no node named \"" + spec->etcd->node + "\"");
    }
    if (spec->etcd->host.empty()) spec->etcd->host = node->host;
    TANDEM_RETURN_IF_ERROR(
        ports.Claim(spec->etcd->host, spec->etcd->client_port, "etcd.client_port"));
    TANDEM_RETURN_IF_ERROR(ports.Claim(spec->etcd->host, spec->etcd->peer_port, "etcd.peer_port"));
  }
  if (spec->pool && !spec->etcd) {
    return InvalidArgumentError("pool: the pool workers need an \"etcd\" section");
  }
  bool any_prefill = false;
  bool any_decode = false;
  for (size_t n = 0; n < spec->nodes.size(); ++n) {
    NodeSpec& node = spec->nodes[n];
    const std::string node_path = Index("nodes", n);
    if (!spec->pool) node.pool = false;
    if (node.pool) {
      TANDEM_RETURN_IF_ERROR(
          ports.Claim(node.host, spec->pool->port, "pool.port (" + node.name + ")"));
      TANDEM_RETURN_IF_ERROR(ports.Claim(node.host, spec->pool->port + 1,
                                         "pool.port + 1 (/metrics, " + node.name + ")"));
    }
    for (size_t g = 0; g < node.engines.size(); ++g) {
      EngineSpec& e = node.engines[g];
      const std::string path = Index(node_path + ".engines", g);
      if (e.host.empty()) e.host = node.host;
      if (e.data_parallel_address.empty()) e.data_parallel_address = e.host;
      if (e.engine_id.empty()) e.engine_id = node.name + "-" + e.name;
      if (e.model.empty()) e.model = spec->model;
      if (e.served_model_name.empty()) e.served_model_name = spec->served_model_name;
      if (e.kv_pool.value_or(false) && !node.pool) {
        return InvalidArgumentError(path + ".kv_pool: node \"" + node.name +
                                    "\" runs no pool worker");
      }
      if (!e.kv_pool) e.kv_pool = node.pool;
      (e.role == EngineRole::kPrefill ? any_prefill : any_decode) = true;
      for (int i = 0; i < e.ranks; ++i) {
        const std::string rank = e.ranks > 1 ? " (rank " + std::to_string(i) + ")" : "";
        TANDEM_RETURN_IF_ERROR(ports.Claim(e.host, e.port + i, path + ".port" + rank));
        const int kv_port = e.kv_port + (e.data_parallel_rank_start + i) * e.tensor_parallel_size;
        if (kv_port > 65535)
          return InvalidArgumentError(path + ".kv_port: kv_port of a rank is over 65535");
        TANDEM_RETURN_IF_ERROR(ports.Claim(e.host, kv_port, path + ".kv_port" + rank));
      }
    }
  }
  if (spec->proxy) {
    const NodeSpec* node = spec->FindNode(spec->proxy->node);
    if (node == nullptr) {
      return InvalidArgumentError("proxy.node: no node named \"" + spec->proxy->node + "\"");
    }
    if (spec->proxy->host.empty()) spec->proxy->host = node->host;
    if (!any_prefill || !any_decode) {
      return InvalidArgumentError(
          std::string("proxy: needs at least one prefill and one decode engine; ") +
          "the nodes have no " + (any_prefill ? "decode" : "prefill") + " engine");
    }
    TANDEM_RETURN_IF_ERROR(ports.Claim(spec->proxy->host, spec->proxy->port, "proxy.port"));
  }
  return Status::Ok();
}

}  // namespace

const char* EngineRoleName(EngineRole role) {
  return role == EngineRole::kPrefill ? "prefill" : "decode";
}

const NodeSpec* ClusterSpec::FindNode(const std::string& node_name) const {
  for (const NodeSpec& node : nodes) {
    if (node.name == node_name) return &node;
  }
  return nullptr;
}

StatusOr<ClusterSpec> ParseClusterSpec(const std::string& json_text) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string what = e.what();
    const size_t at = what.find("] ");
    return InvalidArgumentError("not valid JSON: " +
                                (at == std::string::npos ? what : what.substr(at + 2)));
  }
  ClusterSpec spec;
  ObjectReader r(root, "");
  r.String("name", &spec.name);
  r.String("run_dir", &spec.run_dir);
  r.String("tandem", &spec.tandem);
  r.String("model", &spec.model);
  r.String("served_model_name", &spec.served_model_name);
  r.StringList("engine_args", &spec.engine_args);
  r.Required("nodes");
  const json* etcd = r.Find("etcd");
  const json* pool = r.Find("pool");
  const json* proxy = r.Find("proxy");
  const json* nodes = r.Find("nodes");
  r.Find("comment");  // free text, ignored
  TANDEM_RETURN_IF_ERROR(r.Finish());
  if (!IsName(spec.name)) return InvalidArgumentError("name: \"" + spec.name + "\" is not a name");
  if (etcd != nullptr) TANDEM_RETURN_IF_ERROR(ReadEtcd(*etcd, &spec.etcd.emplace()));
  if (pool != nullptr) TANDEM_RETURN_IF_ERROR(ReadPool(*pool, &spec.pool.emplace()));
  if (proxy != nullptr) TANDEM_RETURN_IF_ERROR(ReadProxy(*proxy, &spec.proxy.emplace()));
  if (!nodes->is_array()) {
    return InvalidArgumentError(std::string("nodes: expected an array, got ") + TypeName(*nodes));
  }
  for (size_t i = 0; i < nodes->size(); ++i) {
    NodeSpec node;
    TANDEM_RETURN_IF_ERROR(ReadNode((*nodes)[i], Index("nodes", i), &node));
    spec.nodes.push_back(std::move(node));
  }
  TANDEM_RETURN_IF_ERROR(Resolve(&spec));
  return spec;
}

StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgumentError(path + ": cannot read the cluster file");
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<ClusterSpec> spec = ParseClusterSpec(text.str());
  if (!spec.ok()) return InvalidArgumentError(path + ": " + std::string(spec.status().message()));
  return spec;
}

}  // namespace tandem::cluster
