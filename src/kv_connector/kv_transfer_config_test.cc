#include "kv_connector/kv_transfer_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/test_paths.h"

namespace tandem::transfer {
namespace {

TEST(KvTransferConfigTest, EverySeedConfigParsesWithItsRole) {
  const std::string text = ReadFileToString(TestDataPath("seed_kv_transfer_configs.json"));
  ASSERT_FALSE(text.empty());
  const auto entries = nlohmann::json::parse(text);
  ASSERT_EQ(entries.size(), 10u);
  for (const auto& e : entries) {
    SCOPED_TRACE(e["source"].get<std::string>() + ":" + std::to_string(e["line"].get<int>()));
    StatusOr<KvTransferConfig> c = ParseKvTransferConfig(e["config"].get<std::string>());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const std::string role = e["role"].get<std::string>();
    EXPECT_EQ(KvRoleName(c->role), role);
    ASSERT_TRUE(c->transfer.has_value());
    EXPECT_EQ(KvRoleName(c->transfer->role), role);
    EXPECT_EQ(c->transfer->kv_port, role == "kv_producer" ? 30000 : 30100);
    // prefill/decode sizes and use_ascend_direct are named as without effect, never dropped.
    EXPECT_TRUE(c->unknown_keys.empty()) << IgnoredKeysMessage(*c);
    EXPECT_NE(IgnoredKeysMessage(*c).find("kv_connector_extra_config.prefill ("), std::string::npos)
        << IgnoredKeysMessage(*c);
    EXPECT_EQ(c->load_failure_policy, LoadFailurePolicy::kRecompute);
  }
}

TEST(KvTransferConfigTest, MultiConnectorWithPoolFromSeed000) {
  const std::string json = R"({
    "kv_connector": "MultiConnector", "kv_role": "kv_consumer", "engine_id": "7",
    "kv_load_failure_policy": "fail",
    "kv_connector_extra_config": {"connectors": [
      {"kv_connector": "MooncakeConnectorV1", "kv_port": "30100",
       "kv_connector_module_path": "vllm_ascend.distributed.mooncake_connector",
       "kv_connector_extra_config": {"use_ascend_direct": true,
          "prefill": {"dp_size": 4, "tp_size": 8}, "decode": {"dp_size": 8, "tp_size": 4}}},
      {"kv_connector": "AscendStoreConnector", "kv_role": "kv_consumer",
       "kv_connector_extra_config": {"lookup_rpc_port": "7001", "backend": "yuanrong", "load_async": true}}]}})";
  StatusOr<KvTransferConfig> c = ParseKvTransferConfig(json);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, KvRole::kConsumer);
  EXPECT_EQ(c->engine_id, "7");
  EXPECT_EQ(c->load_failure_policy, LoadFailurePolicy::kFail);
  ASSERT_TRUE(c->transfer && c->pool);
  EXPECT_EQ(c->transfer->role, KvRole::kConsumer);  // inherited from the top level
  EXPECT_EQ(c->transfer->kv_port, 30100);
  EXPECT_TRUE(c->pool->load_async);
  const std::string t = "kv_transfer_config.kv_connector_extra_config.connectors[0].";
  const std::string p = "kv_transfer_config.kv_connector_extra_config.connectors[1].";
  const std::vector<std::string> want = {
      t + "kv_connector_module_path (Tandem's connectors are built in)",
      t + "kv_connector_extra_config.decode (D pulls from the remote_port in kv_transfer_params; no rank mapping)",
      t + "kv_connector_extra_config.prefill (D pulls from the remote_port in kv_transfer_params; no rank mapping)",
      t + "kv_connector_extra_config.use_ascend_direct (an Ascend transport; Tandem moves KV over TCP or shared "
          "memory)",
      p + "kv_connector_extra_config.backend (yuanrong and mooncake both select Tandem's pool client "
          "(DS_WORKER_ADDR))",
      p + "kv_connector_extra_config.lookup_rpc_port (pool lookups run in the engine process; no lookup server)",
  };
  EXPECT_EQ(c->without_effect, want);  // nlohmann's objects iterate keys in sorted order
  EXPECT_TRUE(c->unknown_keys.empty());
}

TEST(KvTransferConfigTest, UnknownAndIneffectiveKeysAreNamedForTheLog) {
  StatusOr<KvTransferConfig> c = ParseKvTransferConfig(R"({
    "kv_connector": "MultiConnector", "kv_port": 1, "kv_buffer_size": 1e9, "colour": "red",
    "kv_connector_extra_config": {"connectors": [
      {"kv_connector": "AscendStoreConnector", "kv_load_failure_policy": "fail",
       "kv_connector_extra_config": {"backend": "mooncake", "speed": 3}},
      {"kv_connector": "MooncakeConnectorV1", "kv_lease_s": 5,
       "kv_connector_extra_config": {"kv_lease_s": 5}}], "mode": 1}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->transfer->lease_s, 5);
  const std::string x = "kv_transfer_config.kv_connector_extra_config.";
  EXPECT_EQ(c->unknown_keys, (std::vector<std::string>{"kv_transfer_config.colour", x + "mode",
                                                       x + "connectors[0].kv_connector_extra_config.speed",
                                                       x + "connectors[1].kv_lease_s"}));
  const std::string message = IgnoredKeysMessage(*c);
  for (const std::string& needle :
       {std::string("--kv-transfer-config: keys without effect (ignored): "),
        std::string("kv_transfer_config.kv_buffer_size (a vLLM setting"),
        std::string("kv_transfer_config.kv_port (set it on the transfer connector)"),
        x + "connectors[0].kv_load_failure_policy (read at the top level only)",
        x + "connectors[0].kv_connector_extra_config.backend (yuanrong and mooncake",
        x + "connectors order (the transfer connector loads requests with remote-prefill params",
        std::string("; unknown keys (ignored): kv_transfer_config.colour, ")}) {
    EXPECT_NE(message.find(needle), std::string::npos) << needle << "\n" << message;
  }
  // Every key used: nothing to say.
  c = ParseKvTransferConfig(R"({"kv_connector": "TandemTransferConnector", "kv_role": "kv_producer",
                                "kv_port": 30000, "kv_connector_extra_config": {"kv_lease_s": 10}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(IgnoredKeysMessage(*c), "");
}

TEST(KvTransferConfigTest, AliasesAndDefaults) {
  StatusOr<KvTransferConfig> c = ParseKvTransferConfig(R"({"kv_connector": "TandemTransferConnector"})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->role, KvRole::kBoth);
  EXPECT_EQ(c->transfer->kv_port, 30000);
  EXPECT_EQ(c->transfer->lease_s, 30);
  EXPECT_FALSE(c->pool.has_value());
  c = ParseKvTransferConfig(R"({"kv_connector": "TandemPoolConnector", "kv_role": "kv_both",
                                "kv_connector_extra_config": {"backend": "mooncake"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pool->soft_pin_ttl_s, 0);  // off unless asked
  c = ParseKvTransferConfig(R"({"kv_connector": "TandemPoolConnector",
                                "kv_connector_extra_config": {"soft_pin_ttl_s": 1800}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->pool->soft_pin_ttl_s, 1800);
  EXPECT_FALSE(c->transfer.has_value());
}

TEST(KvTransferConfigTest, ErrorsNameTheFieldPath) {
  struct Case {
    const char* json;
    const char* needle;
  };
  const Case cases[] = {
      {"{", "invalid JSON"},
      {"[1]", "kv_transfer_config: expected a JSON object"},
      {R"({"kv_role": "kv_producer"})", "kv_transfer_config.kv_connector: missing"},
      {R"({"kv_connector": "NixlConnector"})", "kv_transfer_config.kv_connector: unknown connector \"NixlConnector\""},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_role": "producer"})", "kv_transfer_config.kv_role: unknown role"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_port": "30x"})", "kv_transfer_config.kv_port: expected an integer"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_port": 70000})", "kv_transfer_config.kv_port: 70000 is out of range"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_port": true})", "kv_transfer_config.kv_port: expected an integer"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_load_failure_policy": "retry"})",
       "kv_transfer_config.kv_load_failure_policy: unknown policy"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_connector_extra_config": {"prefill": {"dp_size": "a"}}})",
       "kv_transfer_config.kv_connector_extra_config.prefill.dp_size"},
      {R"({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [{"kv_connector": "X"}]}})",
       "kv_transfer_config.kv_connector_extra_config.connectors[0].kv_connector: unknown connector"},
      {R"({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [{"kv_connector": "AscendStoreConnector", "kv_connector_extra_config": {"backend": 3}}]}})",
       "connectors[0].kv_connector_extra_config.backend: expected a string"},
      {R"({"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": {}}})",
       "kv_connector_extra_config.connectors: expected a non-empty array"},
      {R"({"kv_connector": "MultiConnector"})", "kv_connector_extra_config.connectors: missing"},
      {R"({"kv_connector": "AscendStoreConnector", "kv_connector_extra_config": {"soft_pin_ttl_s": -1}})",
       "kv_transfer_config.kv_connector_extra_config.soft_pin_ttl_s"},
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_connector_extra_config": 5})",
       "kv_transfer_config.kv_connector_extra_config: expected an object"},
      // A number past double's range is nlohmann's out_of_range, not parse_error: it
      // escaped the handler (and ended the process) before.
      {R"({"kv_connector": "MooncakeConnectorV1", "kv_port": 1e999})", "invalid JSON"},
  };
  for (const Case& c : cases) {
    StatusOr<KvTransferConfig> r = ParseKvTransferConfig(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace tandem::transfer
