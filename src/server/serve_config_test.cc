// The security-relevant defaults and limits of `tandem serve` (docs/SECURITY.md).
#include "server/serve_config.h"

#include <gtest/gtest.h>

namespace tandem::server {
namespace {

TEST(ServeConfigSecurity, BindsLoopbackUnlessTold) {
  ServeConfig c;
  c.served_model_names = {"m"};
  EXPECT_EQ(c.host, "127.0.0.1");
  auto http = MakeHttpOptions(c);
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->host, "127.0.0.1");
  // The transfer server follows --host.
  c.kv_transfer_config =
      R"({"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer","kv_port":"30000"})";
  auto engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ(engine->kv_transfer.bind_host, "127.0.0.1");
  EXPECT_EQ(engine->kv_transfer.advertise_host, "127.0.0.1");
  c.host = "0.0.0.0";
  engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine->kv_transfer.bind_host, "0.0.0.0");
  EXPECT_EQ(engine->kv_transfer.advertise_host, "");  // the CLI finds the machine's address
  EXPECT_EQ(KvTransferOptions().bind_host, "127.0.0.1");
}

TEST(ServeConfigSecurity, RequestLimits) {
  ServeConfig c;
  auto http = MakeHttpOptions(c);
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->max_body_bytes, size_t{32} << 20);
  EXPECT_EQ(http->max_header_bytes, size_t{64} << 10);
  EXPECT_EQ(http->max_connections, 10000u);
  c.max_body_bytes = "1MiB";
  c.max_header_bytes = "8KiB";
  c.max_connections = 3;
  c.port = 9000;
  http = MakeHttpOptions(c);
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->max_body_bytes, size_t{1} << 20);
  EXPECT_EQ(http->max_header_bytes, size_t{8} << 10);
  EXPECT_EQ(http->max_connections, 3u);
  EXPECT_EQ(http->port, 9000);

  auto bad = [](ServeConfig config, const std::string& flag) {
    auto r = MakeHttpOptions(config);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().message();
  };
  ServeConfig b = c;
  b.max_body_bytes = "lots";
  bad(b, "--max-body-bytes");
  b = c;
  b.max_header_bytes = "100";
  bad(b, "--max-header-bytes");
  b = c;
  b.max_connections = 0;
  bad(b, "--max-connections");
}

TEST(ServeConfigSecurity, LogsCarryNoSecrets) {
  const std::string config =
      R"({"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[)"
      R"({"kv_connector":"MooncakeConnectorV1","kv_connector_extra_config":{"auth_token":"s3cret"}},)"
      R"({"kv_connector":"AscendStoreConnector","Api_Key":"k3y","token":null}]}})";
  const std::string logged = RedactSecrets(config);
  EXPECT_EQ(logged.find("s3cret"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("k3y"), std::string::npos) << logged;
  EXPECT_NE(logged.find("MooncakeConnectorV1"), std::string::npos) << logged;
  EXPECT_NE(logged.find(R"("auth_token":"***")"), std::string::npos) << logged;
  EXPECT_EQ(RedactSecrets("{bad"), "<not JSON>");
}

TEST(ServeConfig, SchedulingPolicyAndHealthWatchdog) {
  ServeConfig c;
  auto engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine->scheduling_policy, EngineOptions::SchedulingPolicy::kFcfs);
  EXPECT_EQ(engine->health_watchdog_s, 60);
  c.scheduling_policy = "priority";
  c.health_watchdog_s = 2.5;
  engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine->scheduling_policy, EngineOptions::SchedulingPolicy::kPriority);
  EXPECT_EQ(engine->health_watchdog_s, 2.5);
  c.scheduling_policy = "lifo";
  engine = MakeEngineOptions(c, {});
  EXPECT_NE(engine.status().message().find("--scheduling-policy"), std::string::npos);
  c.scheduling_policy = "fcfs";
  c.health_watchdog_s = 0;
  engine = MakeEngineOptions(c, {});
  EXPECT_NE(engine.status().message().find("--health-watchdog-s"), std::string::npos);
}

TEST(ServeConfig, EngineIndexIsTheDataParallelRank) {
  ServeConfig c;
  EXPECT_EQ(MakeEngineOptions(c, {})->engine_index, 0);
  c.data_parallel_size = 4;
  c.data_parallel_rank = 2;
  EXPECT_EQ(MakeEngineOptions(c, {})->engine_index, 2);
}

// Keys of --kv-transfer-config that change nothing, and unknown ones, are said once.
TEST(ServeConfig, KvTransferKeysWithoutEffectAreLoggedOnce) {
  ServeConfig c;
  c.kv_transfer_config = R"({"kv_connector": "MultiConnector", "kv_role": "kv_producer", "kv_connector_extra_config":
      {"connectors": [{"kv_connector": "MooncakeConnectorV1", "kv_port": "30000",
                       "kv_connector_extra_config": {"prefill": {"dp_size": 4, "tp_size": 8}, "typo": 1}},
                      {"kv_connector": "AscendStoreConnector",
                       "kv_connector_extra_config": {"backend": "mooncake", "lookup_rpc_port": "7001"}}]}})";
  testing::internal::CaptureStderr();
  auto engine = MakeEngineOptions(c, {});
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_TRUE(engine->pool.enabled);
  const std::string line = "--kv-transfer-config: keys without effect (ignored): ";
  ASSERT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find(line), log.rfind(line)) << "said more than once: " << log;
  for (const char* key : {"connectors[0].kv_connector_extra_config.prefill (", "connectors[1].kv_connector_extra_config.backend (",
                          "connectors[1].kv_connector_extra_config.lookup_rpc_port (",
                          "unknown keys (ignored): kv_transfer_config.kv_connector_extra_config.connectors[0]."
                          "kv_connector_extra_config.typo"}) {
    EXPECT_NE(log.find(key), std::string::npos) << key << "\n" << log;
  }
  // Every key used: no line.
  c.kv_transfer_config = R"({"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": 30000})";
  testing::internal::CaptureStderr();
  ASSERT_TRUE(MakeEngineOptions(c, {}).ok());
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("--kv-transfer-config"), std::string::npos);
}

TEST(ServeConfig, AdditionalConfigRecomputeScheduler) {
  ServeConfig c;
  auto engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok());
  EXPECT_FALSE(engine->recompute_scheduler);
  c.additional_config = R"({"recompute_scheduler_enable": true, "enable_mlapo": true, "weight_nz_mode": 1})";
  engine = MakeEngineOptions(c, {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_TRUE(engine->recompute_scheduler);
  EXPECT_EQ(AdditionalConfigIgnoredKeys(c.additional_config),
            (std::vector<std::string>{"enable_mlapo", "weight_nz_mode"}));
  c.additional_config = R"({"recompute_scheduler_enable": "yes"})";
  engine = MakeEngineOptions(c, {});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("recompute_scheduler_enable"), std::string::npos);
  c.additional_config = "[1]";
  EXPECT_FALSE(MakeEngineOptions(c, {}).ok());
}

TEST(ServeConfigKvEvents, PublisherOptionsFollowVllm) {
  ServeConfig c;
  auto none = MakeKvEventPublisherOptions(c);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  c.kv_events_config = R"({"enable_kv_cache_events": false, "publisher": "zmq"})";
  ASSERT_TRUE(MakeKvEventPublisherOptions(c).ok());
  EXPECT_FALSE(MakeKvEventPublisherOptions(c)->has_value());
  c.kv_events_config =
      R"({"enable_kv_cache_events": true, "replay_endpoint": "tcp://*:6000", "topic": "t",
          "hwm": 5, "max_queue_size": 6, "buffer_steps": 7})";
  c.data_parallel_rank = 2;
  auto o = MakeKvEventPublisherOptions(c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->has_value());
  EXPECT_EQ((*o)->endpoint, "tcp://*:5559");  // 5557 + rank 2, as vLLM
  EXPECT_EQ((*o)->replay_endpoint, "tcp://*:6002");
  EXPECT_EQ((*o)->topic, "t");
  EXPECT_EQ((*o)->hwm, 5);
  EXPECT_EQ((*o)->max_queue_size, 6);
  EXPECT_EQ((*o)->buffer_steps, 7);
  c.kv_events_config = R"({"enable_kv_cache_events": true, "publisher": "nats"})";
  EXPECT_EQ(MakeKvEventPublisherOptions(c).status().code(), StatusCode::kInvalidArgument);
  c.kv_events_config = R"({"enable_kv_cache_events": true, "endpoint": "ipc:///tmp/x"})";
  EXPECT_EQ(MakeKvEventPublisherOptions(c).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::server
