#include "cluster/node_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace tandem::cluster {
namespace {

using nlohmann::json;

std::string SourceFile(const std::string& relative) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

// The value after `flag` in argv ("" when absent).
std::string FlagValue(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

// The values after `flag` up to the next "--" flag.
std::vector<std::string> FlagValues(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  auto it = std::find(argv.begin(), argv.end(), flag);
  if (it == argv.end()) return out;
  for (++it; it != argv.end() && it->rfind("--", 0) != 0; ++it) out.push_back(*it);
  return out;
}

bool HasEnv(const ServicePlan& s, const std::string& entry) {
  return std::find(s.env.begin(), s.env.end(), entry) != s.env.end();
}

ClusterSpec Load(const std::string& file) {
  StatusOr<ClusterSpec> spec = LoadClusterSpec(SourceFile(file));
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : ClusterSpec{};
}

TEST(NodePlanTest, LocalClusterStartsEveryServiceInOrder) {
  const ClusterSpec spec = Load("deploy/local.json");
  StatusOr<NodePlan> plan = PlanNode(spec, "local", {"/bin/tandem", ""});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->node_dir, ".tandem/local/local");
  EXPECT_EQ(plan->state_path, ".tandem/local/local/state.json");
  EXPECT_EQ(plan->proxy_url, "http://127.0.0.1:8000");
  EXPECT_EQ(plan->served_model_name, "default");
  EXPECT_TRUE(plan->remote.empty());
  ASSERT_EQ(plan->services.size(), 5u);

  const ServicePlan& etcd = plan->services[0];
  EXPECT_EQ(etcd.name, "etcd");
  EXPECT_EQ(etcd.level, 0);
  EXPECT_EQ(etcd.argv,
            (std::vector<std::string>{
                "etcd", "--name", "local", "--data-dir", ".tandem/local/local/etcd",
                "--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls",
                "http://127.0.0.1:2379", "--listen-peer-urls", "http://127.0.0.1:2380",
                "--initial-advertise-peer-urls", "http://127.0.0.1:2380", "--initial-cluster",
                "local=http://127.0.0.1:2380"}));
  EXPECT_EQ(etcd.ready.Describe(), "GET http://127.0.0.1:2379/health");
  EXPECT_EQ(etcd.log_path, ".tandem/local/local/logs/etcd.log");

  const ServicePlan& pool = plan->services[1];
  EXPECT_EQ(pool.name, "pool");
  EXPECT_EQ(pool.level, 1);
  EXPECT_EQ(std::vector<std::string>(pool.argv.begin(), pool.argv.begin() + 3),
            (std::vector<std::string>{"/bin/tandem", "pool", "run"}));
  EXPECT_EQ(FlagValue(pool.argv, "--worker_address"), "127.0.0.1:31501");
  EXPECT_EQ(FlagValue(pool.argv, "--etcd_address"), "127.0.0.1:2379");
  EXPECT_EQ(FlagValue(pool.argv, "--liveness_check_path"), ".tandem/local/local/pool/liveness");
  EXPECT_EQ(pool.ready.kind, ReadinessCheck::Kind::kLivenessFile);
  EXPECT_EQ(pool.remove_files, std::vector<std::string>{".tandem/local/local/pool/liveness"});
  EXPECT_TRUE(HasEnv(pool, "TANDEM_POOL_RUN_DIR=.tandem/local/local/pool"));

  const ServicePlan& prefill = plan->services[2];
  EXPECT_EQ(prefill.name, "prefill");
  EXPECT_EQ(prefill.level, 2);
  EXPECT_EQ(FlagValue(prefill.argv, "serve"), "models/default.gguf");
  EXPECT_EQ(FlagValue(prefill.argv, "--host"), "127.0.0.1");
  EXPECT_EQ(FlagValue(prefill.argv, "--port"), "8100");
  EXPECT_EQ(FlagValue(prefill.argv, "--cpu-affinity"), "0");
  EXPECT_EQ(FlagValue(prefill.argv, "--threads"), "1");
  EXPECT_EQ(FlagValue(prefill.argv, "--served-model-name"), "default");
  EXPECT_EQ(FlagValue(prefill.argv, "--data-parallel-size"), "");  // one rank: not passed
  EXPECT_NE(std::find(prefill.argv.begin(), prefill.argv.end(), "--enable-prompt-tokens-details"),
            prefill.argv.end());
  EXPECT_TRUE(HasEnv(prefill, "DS_WORKER_ADDR=127.0.0.1:31501"));
  const json p_kv = json::parse(FlagValue(prefill.argv, "--kv-transfer-config"));
  EXPECT_EQ(p_kv["kv_connector"], "MultiConnector");
  EXPECT_EQ(p_kv["kv_role"], "kv_producer");
  EXPECT_EQ(p_kv["kv_connector_extra_config"]["connectors"][0]["kv_connector"],
            "MooncakeConnectorV1");
  EXPECT_EQ(p_kv["kv_connector_extra_config"]["connectors"][0]["kv_port"], "30000");
  EXPECT_EQ(p_kv["kv_connector_extra_config"]["connectors"][1]["kv_connector"],
            "AscendStoreConnector");
  EXPECT_EQ(
      p_kv["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]["backend"],
      "yuanrong");

  const ServicePlan& decode = plan->services[3];
  EXPECT_EQ(decode.name, "decode");
  EXPECT_EQ(FlagValue(decode.argv, "--port"), "8200");
  EXPECT_EQ(FlagValue(decode.argv, "--cpu-affinity"), "1");
  EXPECT_EQ(json::parse(FlagValue(decode.argv, "--kv-transfer-config"))["kv_role"], "kv_consumer");

  const ServicePlan& proxy = plan->services[4];
  EXPECT_EQ(proxy.name, "proxy");
  EXPECT_EQ(proxy.level, 3);
  EXPECT_EQ(FlagValue(proxy.argv, "--host"), "127.0.0.1");
  EXPECT_EQ(FlagValue(proxy.argv, "--port"), "8000");
  EXPECT_EQ(FlagValues(proxy.argv, "--prefiller-hosts"), std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(FlagValues(proxy.argv, "--prefiller-ports"), std::vector<std::string>{"8100"});
  EXPECT_EQ(FlagValues(proxy.argv, "--decoder-ports"), std::vector<std::string>{"8200"});
  EXPECT_EQ(proxy.ready.Describe(), "GET http://127.0.0.1:8000/health");
}

TEST(NodePlanTest, RunDirOverrideAndSpecBinary) {
  ClusterSpec spec = Load("deploy/local.json");
  spec.tandem = "/opt/tandem";
  StatusOr<NodePlan> plan = PlanNode(spec, "local", {"/bin/tandem", "/tmp/x"});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->state_path, "/tmp/x/local/state.json");
  EXPECT_EQ(plan->services[1].argv[0], "/opt/tandem");
}

TEST(NodePlanTest, UnknownNodeListsTheNodes) {
  StatusOr<NodePlan> plan = PlanNode(Load("deploy/a2-8node.json"), "node9", {"tandem", ""});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find(
                "(nodes: node0, node1, node2, node3, node4, node5, node6, node7)"),
            std::string::npos);
}

// Seed 000: 4 prefill nodes with one DP rank each (DP4, TP8), 4 decode nodes with two
// (DP8, TP4), etcd and the proxy on node 0, a pool worker on every node.
TEST(NodePlanTest, SeedA2LayoutMasterPrefillNode) {
  StatusOr<NodePlan> plan = PlanNode(Load("deploy/a2-8node.json"), "node0", {"tandem", ""});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->services.size(), 4u);  // etcd, pool, prefill, proxy
  EXPECT_EQ(plan->services[0].name, "etcd");
  EXPECT_EQ(FlagValue(plan->services[0].argv, "--listen-client-urls"), "http://10.0.0.10:2379");
  EXPECT_EQ(FlagValue(plan->services[0].argv, "--data-dir"), "/tmp/etcd-data");
  const ServicePlan& pool = plan->services[1];
  EXPECT_EQ(FlagValue(pool.argv, "--worker_address"), "10.0.0.10:18481");
  EXPECT_EQ(FlagValue(pool.argv, "--shared_memory_size_mb"), "512000");
  EXPECT_EQ(FlagValue(pool.argv, "--liveness_check_path"), "/workspace/liveness");

  const ServicePlan& p = plan->services[2];
  EXPECT_EQ(FlagValue(p.argv, "serve"), "/home/models/GLM-W8A8");
  EXPECT_EQ(FlagValue(p.argv, "--port"), "6600");
  EXPECT_EQ(FlagValue(p.argv, "--data-parallel-size"), "4");
  EXPECT_EQ(FlagValue(p.argv, "--data-parallel-rank"), "0");
  EXPECT_EQ(FlagValue(p.argv, "--data-parallel-address"), "10.0.0.10");
  EXPECT_EQ(FlagValue(p.argv, "--data-parallel-rpc-port"), "10521");
  EXPECT_EQ(FlagValue(p.argv, "--tensor-parallel-size"), "8");
  EXPECT_EQ(FlagValue(p.argv, "--served-model-name"), "glm5");
  EXPECT_EQ(FlagValue(p.argv, "--max-num-batched-tokens"), "4096");
  EXPECT_TRUE(HasEnv(p, "DS_WORKER_ADDR=10.0.0.10:18481"));
  const json kv = json::parse(FlagValue(p.argv, "--kv-transfer-config"));
  EXPECT_EQ(kv["engine_id"], "0");
  const json& mooncake = kv["kv_connector_extra_config"]["connectors"][0];
  EXPECT_EQ(mooncake["kv_port"], "30000");
  EXPECT_EQ(mooncake["kv_connector_extra_config"]["prefill"],
            json({{"dp_size", 4}, {"tp_size", 8}}));
  EXPECT_EQ(mooncake["kv_connector_extra_config"]["decode"],
            json({{"dp_size", 8}, {"tp_size", 4}}));

  const ServicePlan& proxy = plan->services[3];
  EXPECT_EQ(FlagValues(proxy.argv, "--prefiller-hosts"),
            (std::vector<std::string>{"10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.13"}));
  EXPECT_EQ(FlagValues(proxy.argv, "--prefiller-ports"), (std::vector<std::string>(4, "6600")));
  EXPECT_EQ(FlagValues(proxy.argv, "--decoder-hosts"),
            (std::vector<std::string>{"10.0.0.14", "10.0.0.14", "10.0.0.15", "10.0.0.15",
                                      "10.0.0.16", "10.0.0.16", "10.0.0.17", "10.0.0.17"}));
  EXPECT_EQ(
      FlagValues(proxy.argv, "--decoder-ports"),
      (std::vector<std::string>{"6600", "6601", "6600", "6601", "6600", "6601", "6600", "6601"}));
}

TEST(NodePlanTest, SeedA2LayoutDecodeNodeWaitsForRemoteEtcd) {
  StatusOr<NodePlan> plan = PlanNode(Load("deploy/a2-8node.json"), "node5", {"tandem", ""});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->remote.size(), 1u);
  EXPECT_EQ(plan->remote[0].before_level, 1);
  EXPECT_EQ(plan->remote[0].ready.Describe(), "GET http://10.0.0.10:2379/health");
  EXPECT_TRUE(plan->proxy_url.empty());
  ASSERT_EQ(plan->services.size(), 3u);  // pool, decode-0, decode-1
  EXPECT_EQ(plan->services[0].name, "pool");
  for (int i = 0; i < 2; ++i) {
    const ServicePlan& d = plan->services[1 + i];
    EXPECT_EQ(d.name, "decode-" + std::to_string(i));
    EXPECT_EQ(FlagValue(d.argv, "--port"), std::to_string(6600 + i));
    EXPECT_EQ(FlagValue(d.argv, "--data-parallel-rank"), std::to_string(2 + i));
    EXPECT_EQ(FlagValue(d.argv, "--data-parallel-address"), "10.0.0.14");
    EXPECT_EQ(FlagValue(d.argv, "--max-num-seqs"), "32");
    const json kv = json::parse(FlagValue(d.argv, "--kv-transfer-config"));
    EXPECT_EQ(kv["kv_role"], "kv_consumer");
    EXPECT_EQ(kv["kv_connector_extra_config"]["connectors"][1]["kv_connector_extra_config"]
                ["lookup_rpc_port"],
              std::to_string(2 + i));
    EXPECT_EQ(d.ports.at("kv"), 30100 + (2 + i) * 4);
  }
}

TEST(NodePlanTest, WithoutPoolTheEnginesUseTheTransferConnectorAlone) {
  ClusterSpec spec = Load("deploy/local.json");
  spec.pool.reset();
  spec.nodes[0].pool = false;
  for (EngineSpec& e : spec.nodes[0].engines) e.kv_pool = false;
  StatusOr<NodePlan> plan = PlanNode(spec, "local", {"tandem", ""});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->services.size(), 4u);
  const ServicePlan& prefill = plan->services[1];
  EXPECT_TRUE(prefill.env.empty());
  const json kv = json::parse(FlagValue(prefill.argv, "--kv-transfer-config"));
  EXPECT_EQ(kv, json::parse(R"({"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer",
      "kv_port": "30000", "engine_id": "local-prefill", "kv_connector_extra_config":
      {"prefill": {"dp_size": 1, "tp_size": 1}, "decode": {"dp_size": 1, "tp_size": 1}}})"));
}

TEST(NodePlanTest, ShellQuote) {
  EXPECT_EQ(ShellQuote({"tandem", "serve", "--port", "8000"}), "tandem serve --port 8000");
  EXPECT_EQ(ShellQuote({"a b", "{\"k\": 1}", "it's", ""}), "'a b' '{\"k\": 1}' 'it'\\''s' ''");
}

}  // namespace
}  // namespace tandem::cluster
