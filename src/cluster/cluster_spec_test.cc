#include "cluster/cluster_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace tandem::cluster {
namespace {

using nlohmann::json;

// The smallest PD cluster: etcd, pool, one prefill and one decode engine, the proxy.
json LocalCluster() {
  return json::parse(R"({
    "name": "t",
    "etcd": {"node": "n0", "client_port": 2379, "peer_port": 2380},
    "pool": {"port": 31501},
    "nodes": [{"name": "n0", "host": "127.0.0.1", "engines": [
      {"role": "prefill", "port": 8100, "kv_port": 30000, "cpu_affinity": ["0"], "threads": 1},
      {"role": "decode", "port": 8200, "kv_port": 30100, "cpu_affinity": ["1"], "threads": 1}]}],
    "proxy": {"node": "n0", "port": 8000}
  })");
}

// The message of the InvalidArgument that `j` gives ("" when it parses).
std::string ErrorOf(const json& j) {
  StatusOr<ClusterSpec> spec = ParseClusterSpec(j.dump());
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  return spec.status().message();
}

std::string SourceFile(const std::string& relative) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

TEST(ClusterSpecTest, ParsesTheLocalClusterAndFillsDefaults) {
  StatusOr<ClusterSpec> spec = ParseClusterSpec(LocalCluster().dump());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->run_dir, ".tandem/t");
  EXPECT_EQ(spec->model, "models/default.gguf");
  ASSERT_TRUE(spec->etcd.has_value());
  EXPECT_EQ(spec->etcd->host, "127.0.0.1");
  ASSERT_EQ(spec->nodes.size(), 1u);
  const NodeSpec& node = spec->nodes[0];
  EXPECT_TRUE(node.pool);
  ASSERT_EQ(node.engines.size(), 2u);
  EXPECT_EQ(node.engines[0].name, "prefill");
  EXPECT_EQ(node.engines[0].role, EngineRole::kPrefill);
  EXPECT_EQ(node.engines[0].host, "127.0.0.1");
  EXPECT_EQ(node.engines[0].engine_id, "n0-prefill");
  EXPECT_EQ(node.engines[0].data_parallel_size, 1);
  EXPECT_EQ(node.engines[0].kv_pool, std::optional<bool>(true));
  EXPECT_EQ(node.engines[1].name, "decode");
  EXPECT_EQ(node.engines[1].served_model_name, "default");
  EXPECT_EQ(spec->proxy->host, "127.0.0.1");
}

TEST(ClusterSpecTest, NoPoolSectionMeansNoPoolWorkerAndNoPoolConnector) {
  json j = LocalCluster();
  j.erase("pool");
  StatusOr<ClusterSpec> spec = ParseClusterSpec(j.dump());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->nodes[0].pool);
  EXPECT_EQ(spec->nodes[0].engines[0].kv_pool, std::optional<bool>(false));
}

TEST(ClusterSpecTest, ErrorsNameTheField) {
  json j = LocalCluster();
  j["nodes"][0]["engines"][1]["role"] = "both";
  EXPECT_EQ(ErrorOf(j),
            "nodes[0].engines[1].role: expected \"prefill\" or \"decode\", got \"both\"");

  j = LocalCluster();
  j["nodes"][0]["engines"][0]["port"] = 70000;
  EXPECT_EQ(ErrorOf(j), "nodes[0].engines[0].port: expected an integer in 1..65535, got 70000");

  j = LocalCluster();
  j["nodes"][0]["engines"][0]["port"] = "8100";
  EXPECT_EQ(ErrorOf(j), "nodes[0].engines[0].port: expected an integer in 1..65535, got \"8100\"");

  j = LocalCluster();
  j["nodes"][0]["engines"][0].erase("port");
  EXPECT_EQ(ErrorOf(j), "nodes[0].engines[0].port: required field missing");

  j = LocalCluster();
  j["nodes"][0]["engins"] = json::array();
  EXPECT_EQ(ErrorOf(j), "nodes[0].engins: unknown field");

  j = LocalCluster();
  j["proxy"]["node"] = "n9";
  EXPECT_EQ(ErrorOf(j), "proxy.node: no node named \"n9\"");

  j = LocalCluster();
  j["etcd"]["node"] = "n9";
  EXPECT_EQ(ErrorOf(j), "etcd.node: no node named \"n9\"");

  j = LocalCluster();
  j["nodes"][0]["engines"][0]["cpu_affinity"] = {"0-"};
  EXPECT_EQ(ErrorOf(j),
            "nodes[0].engines[0].cpu_affinity[0]: \"0-\" is not a core list (e.g. \"0\", \"0,2\", "
            "\"4-7\")");

  j = LocalCluster();
  j["nodes"][0]["engines"][0]["cpu_affinity"] = {"0", "1"};
  EXPECT_EQ(ErrorOf(j),
            "nodes[0].engines[0].cpu_affinity: expected one core list per rank (1), got 2");

  j = LocalCluster();
  j["nodes"][0]["host"] = 5;
  EXPECT_EQ(ErrorOf(j), "nodes[0].host: expected a non-empty string, got 5");

  j = LocalCluster();
  j["nodes"] = json::array();
  EXPECT_EQ(ErrorOf(j), "nodes: at least one node is required");

  j = LocalCluster();
  j.erase("nodes");
  EXPECT_EQ(ErrorOf(j), "nodes: required field missing");

  EXPECT_EQ(ErrorOf(json::array()), "the cluster file: expected an object, got array");
}

TEST(ClusterSpecTest, RejectsPortCollisionsOnOneHost) {
  json j = LocalCluster();
  j["proxy"]["port"] = 8200;
  EXPECT_EQ(ErrorOf(j),
            "proxy.port: port 8200 on 127.0.0.1 is also used by nodes[0].engines[1].port");

  j = LocalCluster();
  j["pool"]["port"] = 2378;  // its /metrics port is etcd's
  EXPECT_EQ(
      ErrorOf(j),
      "pool.port + 1 (/metrics, n0): port 2379 on 127.0.0.1 is also used by etcd.client_port");

  j = LocalCluster();
  j["nodes"][0]["engines"][1]["kv_port"] = 30000;
  EXPECT_EQ(ErrorOf(j),
            "nodes[0].engines[1].kv_port: port 30000 on 127.0.0.1 is also used by "
            "nodes[0].engines[0].kv_port");
}

TEST(ClusterSpecTest, RejectsInconsistentParallelismAndReferences) {
  json j = LocalCluster();
  j["nodes"][0]["engines"][1]["ranks"] = 2;
  j["nodes"][0]["engines"][1]["data_parallel_size"] = 2;
  j["nodes"][0]["engines"][1]["data_parallel_rank_start"] = 1;
  j["nodes"][0]["engines"][1]["cpu_affinity"] = {"1", "2"};
  EXPECT_EQ(ErrorOf(j), "nodes[0].engines[1].ranks: ranks 1..2 do not fit in data_parallel_size 2");

  j = LocalCluster();
  j["nodes"][0]["engines"][1]["role"] = "prefill";
  j["nodes"][0]["engines"][1]["name"] = "prefill2";
  EXPECT_EQ(
      ErrorOf(j),
      "proxy: needs at least one prefill and one decode engine; the nodes have no decode engine");

  j = LocalCluster();
  j["nodes"][0]["engines"][1]["name"] = "prefill";
  EXPECT_EQ(ErrorOf(j),
            "nodes[0].engines[1].name: \"prefill\" is used by another engine group of this node "
            "(set \"name\")");

  j = LocalCluster();
  j.erase("etcd");
  EXPECT_EQ(ErrorOf(j), "pool: the pool workers need an \"etcd\" section");

  j = LocalCluster();
  j["nodes"][0]["pool"] = false;
  j["nodes"][0]["engines"][0]["kv_pool"] = true;
  EXPECT_EQ(ErrorOf(j), "nodes[0].engines[0].kv_pool: node \"n0\" runs no pool worker");

  j = LocalCluster();
  j["nodes"].push_back(j["nodes"][0]);
  EXPECT_EQ(ErrorOf(j), "nodes[1].name: \"n0\" names two nodes");
}

TEST(ClusterSpecTest, BadJsonSaysWhere) {
  StatusOr<ClusterSpec> spec = ParseClusterSpec("{\n  \"nodes\": [\n}");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("not valid JSON: parse error at line 3"),
            std::string::npos)
      << spec.status().message();
}

TEST(ClusterSpecTest, KvTransferConfigIsKeptVerbatim) {
  json j = LocalCluster();
  j["nodes"][0]["engines"][0]["kv_transfer_config"] = {{"kv_connector", "MooncakeConnectorV1"},
                                                       {"kv_role", "kv_producer"}};
  j["nodes"][0]["engines"][1]["kv_transfer_config"] = R"({"kv_connector": "MooncakeConnectorV1"})";
  StatusOr<ClusterSpec> spec = ParseClusterSpec(j.dump());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(json::parse(spec->nodes[0].engines[0].kv_transfer_config)["kv_role"], "kv_producer");
  EXPECT_EQ(spec->nodes[0].engines[1].kv_transfer_config,
            R"({"kv_connector":"MooncakeConnectorV1"})");

  j["nodes"][0]["engines"][1]["kv_transfer_config"] = "{not json";
  EXPECT_EQ(
      ErrorOf(j),
      "nodes[0].engines[1].kv_transfer_config: expected a JSON object (or a string holding one)");
}

TEST(ClusterSpecTest, LoadNamesTheFile) {
  StatusOr<ClusterSpec> spec = LoadClusterSpec("/nonexistent/cluster.json");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "/nonexistent/cluster.json: cannot read the cluster file");
}

TEST(ClusterSpecTest, ShippedFilesParse) {
  for (const char* file : {"deploy/local.json", "deploy/a2-8node.json"}) {
    StatusOr<ClusterSpec> spec = LoadClusterSpec(SourceFile(file));
    EXPECT_TRUE(spec.ok()) << file << ": " << spec.status().ToString();
  }
}

}  // namespace
}  // namespace tandem::cluster
