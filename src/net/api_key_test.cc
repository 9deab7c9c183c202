#include "net/api_key.h"

#include <gtest/gtest.h>

namespace tandem::net {
namespace {

HttpRequest WithAuthorization(std::string value) {
  HttpRequest request;
  request.method = "GET";
  request.target = "/v1/models";
  request.headers.Set("Authorization", std::move(value));
  return request;
}

TEST(ApiKey, BearerMustMatchExactly) {
  EXPECT_TRUE(HasApiKey(WithAuthorization("Bearer k3y"), "k3y"));
  EXPECT_TRUE(HasApiKey(WithAuthorization("bearer k3y"), "k3y"));  // the scheme ignores case
  for (const char* bad : {"Bearer k3", "Bearer k3yy", "Bearer K3Y", "Bearer ", "Bearer", "k3y",
                          "Basic azN5", "Bearer  k3y", ""}) {
    EXPECT_FALSE(HasApiKey(WithAuthorization(bad), "k3y")) << bad;
  }
  HttpRequest none;
  EXPECT_FALSE(HasApiKey(none, "k3y"));
  EXPECT_TRUE(HasApiKey(none, ""));  // no key configured: everything passes
}

TEST(ApiKey, SecretEquals) {
  EXPECT_TRUE(SecretEquals("", ""));
  EXPECT_TRUE(SecretEquals("abc", "abc"));
  EXPECT_FALSE(SecretEquals("abd", "abc"));
  EXPECT_FALSE(SecretEquals("ab", "abc"));
  EXPECT_FALSE(SecretEquals(std::string_view("ab\0", 3), "abc"));
}

TEST(ApiKey, HealthOrMetricsPaths) {
  for (const char* open : {"/health", "/healthcheck", "/ping", "/metrics", "/version"})
    EXPECT_TRUE(HealthOrMetricsPath(open)) << open;
  for (const char* guarded : {"/v1/models", "/v1/completions", "/tokenize", "/health/", "/metricsx",
                              "/kv_transfer/abort", "/instances/add", ""})
    EXPECT_FALSE(HealthOrMetricsPath(guarded)) << guarded;
}

}  // namespace
}  // namespace tandem::net
