#include "net/api_key.h"

#include "net/http_headers.h"

namespace tandem::net {

bool HasApiKey(const HttpRequest& request, std::string_view key) {
  if (key.empty()) return true;
  const std::string_view auth = request.headers.Get("Authorization").value_or("");
  constexpr std::string_view kBearer = "Bearer ";
  return auth.size() > kBearer.size() &&
         EqualsIgnoreCase(auth.substr(0, kBearer.size()), kBearer) &&
         SecretEquals(auth.substr(kBearer.size()), key);
}

bool HealthOrMetricsPath(std::string_view path) {
  return path == "/health" || path == "/healthcheck" || path == "/ping" || path == "/metrics" ||
         path == "/version";
}

}  // namespace tandem::net
