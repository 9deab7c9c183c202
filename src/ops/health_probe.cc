#include "ops/health_probe.h"

#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <ostream>

#include "net/http_client.h"

namespace tandem::ops {
namespace {

using nlohmann::json;

// Appends "YYYY-MM-DD HH:MM:SS [LEVEL] [tandem probe] message" lines, as the
// logging.basicConfig of tests/data/seed_scripts/vllm_probe.py does.
class ProbeLog {
 public:
  explicit ProbeLog(const std::string& path) {
    if (!path.empty()) file_.open(path, std::ios::app);
  }
  void Info(const std::string& message) { Write("INFO", message); }
  void Error(const std::string& message) { Write("ERROR", message); }

 private:
  void Write(const char* level, const std::string& message) {
    if (!file_.is_open()) return;
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);
    file_ << stamp << " [" << level << "] [tandem probe] " << message << "\n";
    file_.flush();
  }
  std::ofstream file_;
};

// The chat completion check shared by both probes; logs each failure.
bool ChatCompletionHealthy(const ReadinessProbeOptions& o, ProbeLog& log, std::ostream& out) {
  json request = {{"model", o.model},
                  {"messages", json::array({{{"role", "user"}, {"content", "hello"}}})},
                  {"stream", false},
                  {"max_tokens", o.max_tokens},
                  {"temperature", o.temperature},
                  {"chat_template_kwargs", {{"enable_thinking", false}}}};
  net::HttpHeaders headers{{"Content-Type", "application/json"}};
  if (!o.api_key.empty()) headers.Set("Authorization", "Bearer " + o.api_key);
  net::HttpClient client;
  StatusOr<net::HttpResponse> response =
      client.Fetch("POST", o.url, std::move(headers), request.dump(), o.timeout);
  if (!response.ok()) {
    log.Error("requests post failed, Exception: " + response.status().ToString());
    return false;
  }
  if (response->status != 200) {
    log.Error("Response error, status code: " + std::to_string(response->status) +
              ", text: " + response->body);
    return false;
  }
  json body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  const json* content = nullptr;
  if (body.is_object() && body.contains("choices") && body["choices"].is_array() &&
      !body["choices"].empty() && body["choices"][0].contains("message")) {
    const json& message = body["choices"][0]["message"];
    if (message.is_object() && message.contains("content")) content = &message["content"];
  }
  if (content == nullptr || !content->is_string()) {
    log.Error("json parse failed, text: " + response->body);
    return false;
  }
  if (content->get_ref<const std::string&>().empty()) {
    log.Error("response content len is 0");
    return false;
  }
  out << "vLLM serve check success!" << std::endl;
  log.Info("health check success, response: " + response->body);
  return true;
}

bool EtcdHealthy(const LivenessProbeOptions& o, ProbeLog& log, std::ostream& out) {
  net::HttpClient client;
  StatusOr<net::HttpResponse> response =
      client.Fetch("GET", "http://" + o.etcd_address + "/health", {}, {}, o.etcd_timeout);
  bool healthy = false;
  if (response.ok() && response->status == 200) {
    json body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    // etcd answers {"health":"true","reason":""} (the value is a string).
    healthy = body.is_object() && body.contains("health") && body["health"] == "true";
  }
  if (!healthy) {
    const std::string why = !response.ok()
                                ? response.status().ToString()
                                : std::to_string(response->status) + " " + response->body;
    log.Error("etcd check fail ! etcd is not ready: " + o.etcd_address + " (" + why + ")");
    return false;
  }
  out << "etcd is ready: " << o.etcd_address << std::endl;
  log.Info("etcd check success !");
  return true;
}

}  // namespace

Status CheckLivenessFile(const std::string& path, std::chrono::seconds max_age,
                         std::filesystem::file_time_type now) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return FailedPreconditionError("liveness probe file " + path + " not exists!");
  }
  std::ifstream in(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (content.find("liveness check success") == std::string::npos) {
    return FailedPreconditionError("liveness probe " + path + " check failed: " + content);
  }
  const auto modified = std::filesystem::last_write_time(path, ec);
  if (ec) return FailedPreconditionError("liveness probe " + path + ": " + ec.message());
  // Whole seconds, as yr_liveness_check.sh's `stat -c %Y` / `date +%s` comparison.
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(now - modified);
  if (age > max_age) {
    return FailedPreconditionError("liveness probe not update in " +
                                   std::to_string(max_age.count()) + " s (" + path + " is " +
                                   std::to_string(age.count()) + " s old)");
  }
  return Status::Ok();
}

int RunReadinessProbe(const ReadinessProbeOptions& options, std::ostream& out) {
  ProbeLog log(options.log_file);
  if (!ChatCompletionHealthy(options, log, out)) return 1;
  log.Info("Master node health check completed");
  return 0;
}

int RunLivenessProbe(const LivenessProbeOptions& options, std::ostream& out) {
  ProbeLog log(options.readiness.log_file);
  Status file = CheckLivenessFile(options.liveness_file, options.liveness_timeout,
                                  std::filesystem::file_time_type::clock::now());
  if (!file.ok()) {
    log.Error(file.message());
    log.Error("pool check fail !");
    return 1;
  }
  out << "pool liveness check success" << std::endl;
  log.Info("pool check success !");
  if (!options.master) {
    log.Info("Slave node health check completed (only pool check)");
    return 0;
  }
  log.Info("Master node health check start");
  if (!EtcdHealthy(options, log, out)) return 1;
  if (!ChatCompletionHealthy(options.readiness, log, out)) return 1;
  log.Info("end");
  return 0;
}

}  // namespace tandem::ops
