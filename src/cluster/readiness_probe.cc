#include "cluster/readiness_probe.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "ops/health_probe.h"

namespace tandem::cluster {

Status ProbeOnce(const ReadinessCheck& check, net::HttpClient& http) {
  if (check.kind == ReadinessCheck::Kind::kLivenessFile) {
    // The worker rewrites the file every few seconds while healthy; a minute is lenient.
    Status s = ops::CheckLivenessFile(check.file, std::chrono::seconds(60),
                                      std::filesystem::file_time_type::clock::now());
    return s.ok() ? s : UnavailableError(s.message());
  }
  net::HttpClientRequest request;
  request.host = check.host;
  request.port = static_cast<uint16_t>(check.port);
  request.target = check.path;
  request.timeout = std::chrono::seconds(2);
  if (!check.api_key_env.empty()) {
    if (const char* key = std::getenv(check.api_key_env.c_str()); key != nullptr && *key != '\0') {
      request.headers.Set("Authorization", std::string("Bearer ") + key);
    }
  }
  StatusOr<net::HttpResponse> response = http.Fetch(std::move(request));
  if (!response.ok()) return UnavailableError(response.status().message());
  if (response->status != 200)
    return UnavailableError("status " + std::to_string(response->status));
  if (!check.body_contains.empty() &&
      response->body.find(check.body_contains) == std::string::npos) {
    return UnavailableError("the answer lacks " + check.body_contains + ": " +
                            response->body.substr(0, 200));
  }
  return Status::Ok();
}

}  // namespace tandem::cluster
