#include "net/kv_events_config.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace tandem::net {
namespace {

using Json = nlohmann::json;

Status Bad(const std::string& what) { return InvalidArgumentError("--kv-events-config: " + what); }

Status ReadInt(const Json& value, const std::string& key, int min, int* out) {
  if (!value.is_number_integer()) return Bad(key + " must be an integer, got " + value.dump());
  const int64_t v = value.get<int64_t>();
  if (v < min || v > 1'000'000'000) {
    return Bad(key + " must be in [" + std::to_string(min) + ", 1000000000], got " +
               std::to_string(v));
  }
  *out = static_cast<int>(v);
  return Status();
}

Status ReadString(const Json& value, const std::string& key, bool allow_null, std::string* out) {
  if (allow_null && value.is_null()) {
    out->clear();
    return Status();
  }
  if (!value.is_string()) return Bad(key + " must be a string, got " + value.dump());
  *out = value.get<std::string>();
  return Status();
}

}  // namespace

StatusOr<KvEventsConfig> ParseKvEventsConfig(const std::string& json_text) {
  const Json parsed = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Bad("not valid JSON: " + json_text);
  if (!parsed.is_object()) return Bad("expected a JSON object, got " + json_text);
  KvEventsConfig c;
  std::string publisher;
  bool publisher_set = false;
  for (auto it = parsed.begin(); it != parsed.end(); ++it) {
    const std::string& key = it.key();
    const Json& v = it.value();
    if (key == "enable_kv_cache_events") {
      if (!v.is_boolean()) return Bad(key + " must be true or false, got " + v.dump());
      c.enable_kv_cache_events = v.get<bool>();
    } else if (key == "publisher") {
      if (v.is_null()) continue;  // vLLM's default: chosen from enable_kv_cache_events
      TANDEM_RETURN_IF_ERROR(ReadString(v, key, false, &publisher));
      publisher_set = true;
    } else if (key == "endpoint") {
      TANDEM_RETURN_IF_ERROR(ReadString(v, key, false, &c.endpoint));
      if (c.endpoint.empty()) return Bad("endpoint must not be empty");
    } else if (key == "replay_endpoint") {
      TANDEM_RETURN_IF_ERROR(ReadString(v, key, true, &c.replay_endpoint));
    } else if (key == "buffer_steps") {
      TANDEM_RETURN_IF_ERROR(ReadInt(v, key, 1, &c.buffer_steps));
    } else if (key == "hwm") {
      TANDEM_RETURN_IF_ERROR(ReadInt(v, key, 0, &c.hwm));
    } else if (key == "max_queue_size") {
      TANDEM_RETURN_IF_ERROR(ReadInt(v, key, 1, &c.max_queue_size));
    } else if (key == "topic") {
      TANDEM_RETURN_IF_ERROR(ReadString(v, key, false, &c.topic));
    } else {
      return Bad("unknown key \"" + key +
                 "\" (known: enable_kv_cache_events, publisher, endpoint, replay_endpoint, "
                 "buffer_steps, hwm, max_queue_size, topic)");
    }
  }
  if (!publisher_set) publisher = c.enable_kv_cache_events ? "zmq" : "null";
  if (publisher != "zmq" && publisher != "null") {
    return Bad("unknown publisher \"" + publisher + "\" (known: \"zmq\", \"null\")");
  }
  c.publisher = publisher;
  return c;
}

StatusOr<std::string> OffsetEndpointPort(const std::string& endpoint, int data_parallel_rank) {
  if (endpoint.empty() || data_parallel_rank == 0) return endpoint;
  if (endpoint.find("inproc") != std::string::npos) {
    return endpoint + "_dp" + std::to_string(data_parallel_rank);
  }
  if (endpoint.find("tcp") == std::string::npos) {
    return InvalidArgumentError("--kv-events-config: endpoint " + endpoint +
                                " cannot be offset for data-parallel rank " +
                                std::to_string(data_parallel_rank) + " (tcp or inproc only)");
  }
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return endpoint;
  const std::string port_text = endpoint.substr(colon + 1);
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
      port + data_parallel_rank > 65535) {
    return InvalidArgumentError("--kv-events-config: endpoint " + endpoint +
                                " has no port to offset for data-parallel rank " +
                                std::to_string(data_parallel_rank));
  }
  return endpoint.substr(0, colon + 1) + std::to_string(port + data_parallel_rank);
}

}  // namespace tandem::net
