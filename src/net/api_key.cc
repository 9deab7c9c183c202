#include "net/api_key.h"

#include "net/http_headers.h"

namespace tandem::net {

bool SecretEquals(std::string_view given, std::string_view secret) {
  if (given.size() != secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ secret[i]);
  }
  return diff == 0;
}

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
