// Readiness checks of keyed services: engines and the proxy inherit VLLM_API_KEY from
// `tandem up`, which then guards their /health; the probes must send it.
#include "cluster/readiness_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "net/api_key.h"
#include "net/http_server.h"

namespace tandem::cluster {
namespace {

std::string SourceFile(const std::string& relative) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

TEST(ReadinessProbeTest, EnginesAndTheProxyAreProbedWithTheApiKeyVariable) {
  StatusOr<ClusterSpec> spec = LoadClusterSpec(SourceFile("deploy/local.json"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  StatusOr<NodePlan> plan = PlanNode(*spec, "local", {"tandem", ""});
  ASSERT_TRUE(plan.ok());
  for (const ServicePlan& s : plan->services) {
    const bool keyed = s.kind == ServiceKind::kEngine || s.kind == ServiceKind::kProxy;
    EXPECT_EQ(s.ready.api_key_env, keyed ? "VLLM_API_KEY" : "") << s.name;
    // No secret in what is printed (--dry-run) or kept (state.json).
    for (const std::string& arg : s.argv)
      EXPECT_EQ(arg.find("api-key"), std::string::npos) << s.name;
  }
}

TEST(ReadinessProbeTest, SendsTheKeyOnlyWhenTheVariableIsSet) {
  net::HttpServerOptions options;
  options.port = 0;
  net::HttpServer server(options);
  server.Route("GET", "/health",
               [](net::HttpRequest request, std::shared_ptr<net::HttpResponseWriter> writer) {
                 writer->SendResponse(net::HasApiKey(request, "k3y") ? 200 : 401, {}, "");
               });
  ASSERT_TRUE(server.Start().ok());
  ReadinessCheck check;
  check.host = "127.0.0.1";
  check.port = server.port();
  check.path = "/health";
  check.api_key_env = "TANDEM_READINESS_TEST_KEY";
  net::HttpClient http;
  unsetenv("TANDEM_READINESS_TEST_KEY");
  Status s = ProbeOnce(check, http);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("401"), std::string::npos) << s.message();
  setenv("TANDEM_READINESS_TEST_KEY", "k3y", 1);
  EXPECT_TRUE(ProbeOnce(check, http).ok());
  check.api_key_env.clear();  // etcd's check: never sends the key
  EXPECT_FALSE(ProbeOnce(check, http).ok());
  unsetenv("TANDEM_READINESS_TEST_KEY");
  server.Stop();
}

}  // namespace
}  // namespace tandem::cluster
