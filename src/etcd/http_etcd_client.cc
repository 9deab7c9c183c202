#include "etcd/http_etcd_client.h"

#include <charconv>
#include <mutex>
#include <nlohmann/json.hpp>

#include "etcd/base64.h"
#include "net/http_client.h"

namespace tandem::etcd {
namespace {

using nlohmann::json;

// grpc-gateway writes int64 as a JSON string; accept numbers too.
int64_t JsonInt(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    int64_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
  }
  return 0;
}

std::string JsonString(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

StatusOr<std::string> DecodeField(const json& obj, const char* name) {
  auto decoded = Base64Decode(JsonString(obj, name));
  if (!decoded.ok()) return InternalError(std::string("etcd: bad base64 in ") + name);
  return decoded;
}

StatusOr<KeyValue> ParseKeyValue(const json& j) {
  KeyValue kv;
  TANDEM_ASSIGN_OR_RETURN(kv.key, DecodeField(j, "key"));
  TANDEM_ASSIGN_OR_RETURN(kv.value, DecodeField(j, "value"));
  kv.create_revision = JsonInt(j, "create_revision");
  kv.mod_revision = JsonInt(j, "mod_revision");
  kv.lease = JsonInt(j, "lease");
  return kv;
}

int64_t HeaderRevision(const json& j) {
  auto it = j.find("header");
  return it != j.end() && it->is_object() ? JsonInt(*it, "revision") : 0;
}

// Maps a gRPC status code from the gateway's error body to ours.
Status GrpcError(int code, const std::string& message) {
  std::string text = "etcd: " + message;
  switch (code) {
    case 1:
      return CancelledError(text);
    case 3:
      return InvalidArgumentError(text);
    case 4:
      return DeadlineExceededError(text);
    case 5:
      return NotFoundError(text);
    case 6:
      return AlreadyExistsError(text);
    case 7:
      return PermissionDeniedError(text);
    case 8:
      return ResourceExhaustedError(text);
    case 9:
      return FailedPreconditionError(text);
    case 10:
      return AbortedError(text);
    case 16:
      return UnauthenticatedError(text);
    default:
      return UnavailableError(text);
  }
}

// Errors inside a 200 response or a stream line: {"error": {...}} or {"error":"..","code":N}.
Status ErrorFromJson(const json& j) {
  if (j.contains("code") && j["code"].is_number_integer()) {
    return GrpcError(j["code"].get<int>(), JsonString(j, "message"));
  }
  auto it = j.find("error");
  if (it != j.end() && it->is_object()) return ErrorFromJson(*it);
  return UnavailableError("etcd: " + j.dump());
}

json OpJson(const TxnOp& op) {
  if (op.kind == TxnOp::Kind::kPut) {
    json put = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
    if (op.lease != 0) put["lease"] = std::to_string(op.lease);
    return {{"request_put", put}};
  }
  json del = {{"key", Base64Encode(op.key)}};
  if (!op.range_end.empty()) del["range_end"] = Base64Encode(op.range_end);
  return {{"request_delete_range", del}};
}

const char* TargetName(TxnCompare::Target t) {
  switch (t) {
    case TxnCompare::Target::kCreateRevision:
      return "CREATE";
    case TxnCompare::Target::kModRevision:
      return "MOD";
    case TxnCompare::Target::kVersion:
      return "VERSION";
    case TxnCompare::Target::kValue:
      return "VALUE";
  }
  return "CREATE";
}

const char* ResultName(TxnCompare::Result r) {
  switch (r) {
    case TxnCompare::Result::kEqual:
      return "EQUAL";
    case TxnCompare::Result::kNotEqual:
      return "NOT_EQUAL";
    case TxnCompare::Result::kGreater:
      return "GREATER";
    case TxnCompare::Result::kLess:
      return "LESS";
  }
  return "EQUAL";
}

json CompareJson(const TxnCompare& c) {
  json j = {{"key", Base64Encode(c.key)},
            {"target", TargetName(c.target)},
            {"result", ResultName(c.result)}};
  switch (c.target) {
    case TxnCompare::Target::kCreateRevision:
      j["create_revision"] = std::to_string(c.number);
      break;
    case TxnCompare::Target::kModRevision:
      j["mod_revision"] = std::to_string(c.number);
      break;
    case TxnCompare::Target::kVersion:
      j["version"] = std::to_string(c.number);
      break;
    case TxnCompare::Target::kValue:
      j["value"] = Base64Encode(c.value);
      break;
  }
  return j;
}

// The state of one watch shared with the stream callbacks; `mu` makes the handle's
// destruction wait for a running callback and silences later ones.
struct WatchState {
  std::mutex mu;
  bool active = true;
  WatchCallbacks callbacks;
  std::string buffer;  // bytes of an incomplete JSON object
  std::shared_ptr<net::HttpClientStream> stream;

  void Close(Status status) {  // precondition: mu held
    if (!active) return;
    active = false;
    if (callbacks.on_closed) callbacks.on_closed(std::move(status));
  }

  // Splits the buffer into complete top-level JSON objects (the gateway writes one
  // object per message) and handles each. Precondition: mu held.
  void Consume() {
    size_t start = 0;
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < buffer.size() && active; ++i) {
      char c = buffer[i];
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
        continue;
      }
      if (c == '"')
        in_string = true;
      else if (c == '{') {
        if (depth++ == 0) start = i;
      } else if (c == '}' && depth > 0 && --depth == 0) {
        HandleMessage(std::string_view(buffer).substr(start, i + 1 - start));
        buffer.erase(0, i + 1);
        i = static_cast<size_t>(-1);  // restart the scan on the rest
      }
    }
    if (buffer.size() > (64u << 20)) Close(InternalError("etcd watch: oversized message"));
  }

  void HandleMessage(std::string_view text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Close(InternalError("etcd watch: bad JSON"));
    auto result = j.find("result");
    if (result == j.end() || !result->is_object()) return Close(ErrorFromJson(j));
    const json& r = *result;
    if (r.value("canceled", false)) {
      return Close(
          AbortedError("etcd watch canceled: " + JsonString(r, "cancel_reason") +
                       " compact_revision=" + std::to_string(JsonInt(r, "compact_revision"))));
    }
    if (JsonInt(r, "compact_revision") != 0) return Close(AbortedError("etcd watch: compacted"));
    auto events_it = r.find("events");
    if (events_it == r.end() || !events_it->is_array()) return;  // created / progress
    std::vector<WatchEvent> events;
    for (const json& e : *events_it) {
      WatchEvent ev;
      ev.type =
          JsonString(e, "type") == "DELETE" ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
      auto kv_it = e.find("kv");
      if (kv_it == e.end()) continue;
      auto kv = ParseKeyValue(*kv_it);
      if (!kv.ok()) return Close(kv.status());
      ev.kv = std::move(kv).value();
      events.push_back(std::move(ev));
    }
    if (callbacks.on_events) callbacks.on_events(events, HeaderRevision(r));
  }
};

class HttpWatch : public EtcdWatch {
 public:
  explicit HttpWatch(std::shared_ptr<WatchState> state) : state_(std::move(state)) {}
  ~HttpWatch() override {
    std::shared_ptr<net::HttpClientStream> stream;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->active = false;
      stream = state_->stream;
    }
    if (stream) stream->Cancel();
  }

 private:
  std::shared_ptr<WatchState> state_;
};

}  // namespace

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

StatusOr<bool> EtcdClient::PutIfAbsent(const std::string& key, const std::string& value,
                                       int64_t lease) {
  TxnCompare absent{key, TxnCompare::Target::kCreateRevision, TxnCompare::Result::kEqual, 0, {}};
  TxnOp put{TxnOp::Kind::kPut, key, value, lease, {}};
  TANDEM_ASSIGN_OR_RETURN(TxnResult r, Txn({absent}, {put}, {}));
  return r.succeeded;
}

StatusOr<std::unique_ptr<HttpEtcdClient>> HttpEtcdClient::Create(HttpEtcdClientOptions options) {
  std::vector<Endpoint> endpoints;
  std::string_view rest = options.endpoints;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.starts_with("http://")) item.remove_prefix(7);
    while (!item.empty() && item.back() == '/') item.remove_suffix(1);
    size_t colon = item.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        std::from_chars(item.data() + colon + 1, item.data() + item.size(), port).ec !=
            std::errc() ||
        port <= 0 || port > 65535) {
      return InvalidArgumentError("etcd address '" + std::string(item) + "' is not IP:PORT");
    }
    endpoints.push_back({std::string(item.substr(0, colon)), static_cast<uint16_t>(port)});
  }
  if (endpoints.empty()) return InvalidArgumentError("etcd address is empty");
  return std::unique_ptr<HttpEtcdClient>(
      new HttpEtcdClient(std::move(options), std::move(endpoints)));
}

HttpEtcdClient::HttpEtcdClient(HttpEtcdClientOptions options, std::vector<Endpoint> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)) {
  net::HttpClientOptions http_options;
  http_options.io_threads = 1;
  http_ = std::make_unique<net::HttpClient>(http_options);
}

HttpEtcdClient::~HttpEtcdClient() = default;

StatusOr<std::string> HttpEtcdClient::Call(const std::string& path, const std::string& json_body) {
  size_t index = current_endpoint_.load() % endpoints_.size();
  const Endpoint& ep = endpoints_[index];
  net::HttpClientRequest request;
  request.method = "POST";
  request.host = ep.host;
  request.port = ep.port;
  request.target = path;
  request.headers.Set("Content-Type", "application/json");
  request.body = json_body;
  request.timeout = options_.request_timeout;
  auto response = http_->Fetch(std::move(request));
  if (!response.ok()) {
    current_endpoint_.compare_exchange_strong(index, index + 1);
    const Status& s = response.status();
    return UnavailableError("etcd " + ep.host + ":" + std::to_string(ep.port) + path + ": " +
                            s.message());
  }
  if (response->status != 200) {
    json j = json::parse(response->body, nullptr, false);
    if (j.is_object()) return ErrorFromJson(j);
    return UnavailableError("etcd " + path + ": HTTP " + std::to_string(response->status));
  }
  return std::move(response->body);
}

namespace {
StatusOr<json> ParseObject(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InternalError("etcd: malformed JSON answer");
  if (j.contains("error")) return ErrorFromJson(j);
  return j;
}
}  // namespace

StatusOr<int64_t> HttpEtcdClient::Put(const std::string& key, const std::string& value,
                                      int64_t lease) {
  json req = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/put", req.dump()));
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body));
  return HeaderRevision(j);
}

StatusOr<RangeResult> HttpEtcdClient::Range(const std::string& key, const std::string& range_end) {
  json req = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) req["range_end"] = Base64Encode(range_end);
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/range", req.dump()));
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body));
  RangeResult result;
  result.revision = HeaderRevision(j);
  auto kvs = j.find("kvs");
  if (kvs != j.end() && kvs->is_array()) {
    for (const json& item : *kvs) {
      TANDEM_ASSIGN_OR_RETURN(KeyValue kv, ParseKeyValue(item));
      result.kvs.push_back(std::move(kv));
    }
  }
  return result;
}

StatusOr<int64_t> HttpEtcdClient::DeleteRange(const std::string& key,
                                              const std::string& range_end) {
  json req = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) req["range_end"] = Base64Encode(range_end);
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/deleterange", req.dump()));
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body));
  return JsonInt(j, "deleted");
}

StatusOr<TxnResult> HttpEtcdClient::Txn(const std::vector<TxnCompare>& compares,
                                        const std::vector<TxnOp>& success,
                                        const std::vector<TxnOp>& failure) {
  json req = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) req["compare"].push_back(CompareJson(c));
  for (const auto& op : success) req["success"].push_back(OpJson(op));
  for (const auto& op : failure) req["failure"].push_back(OpJson(op));
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/txn", req.dump()));
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body));
  return TxnResult{j.value("succeeded", false), HeaderRevision(j)};
}

StatusOr<int64_t> HttpEtcdClient::LeaseGrant(int64_t ttl_s) {
  json req = {{"TTL", std::to_string(ttl_s)}};
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/grant", req.dump()));
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body));
  if (!JsonString(j, "error").empty())
    return UnavailableError("etcd lease grant: " + JsonString(j, "error"));
  int64_t id = JsonInt(j, "ID");
  if (id == 0) return InternalError("etcd lease grant: no ID in answer");
  return id;
}

StatusOr<int64_t> HttpEtcdClient::LeaseKeepAlive(int64_t lease_id) {
  // The gateway maps the bidirectional stream to one request -> one result message.
  json req = {{"ID", std::to_string(lease_id)}};
  TANDEM_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/keepalive", req.dump()));
  size_t end = body.find('\n');
  TANDEM_ASSIGN_OR_RETURN(json j, ParseObject(body.substr(0, end)));
  auto result = j.find("result");
  if (result == j.end() || !result->is_object()) return InternalError("etcd keepalive: no result");
  int64_t ttl = JsonInt(*result, "TTL");
  if (ttl <= 0) return NotFoundError("etcd lease " + std::to_string(lease_id) + " not found");
  return ttl;
}

Status HttpEtcdClient::LeaseRevoke(int64_t lease_id) {
  json req = {{"ID", std::to_string(lease_id)}};
  auto body = Call("/v3/lease/revoke", req.dump());
  if (!body.ok()) return body.status();
  return ParseObject(*body).status();
}

StatusOr<std::unique_ptr<EtcdWatch>> HttpEtcdClient::Watch(const std::string& key,
                                                           const std::string& range_end,
                                                           int64_t start_revision,
                                                           WatchCallbacks callbacks) {
  json create = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) create["range_end"] = Base64Encode(range_end);
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  json req = {{"create_request", create}};

  size_t index = current_endpoint_.load() % endpoints_.size();
  const Endpoint& ep = endpoints_[index];
  net::HttpClientRequest request;
  request.method = "POST";
  request.host = ep.host;
  request.port = ep.port;
  request.target = "/v3/watch";
  request.headers.Set("Content-Type", "application/json");
  request.body = req.dump();
  request.timeout = std::chrono::milliseconds(0);

  auto state = std::make_shared<WatchState>();
  state->callbacks = std::move(callbacks);
  net::HttpStreamCallbacks cb;
  std::weak_ptr<WatchState> weak = state;
  cb.on_headers = [weak](int status, const net::HttpHeaders&) {
    auto s = weak.lock();
    if (!s || status == 200) return;
    std::lock_guard<std::mutex> lock(s->mu);
    s->Close(UnavailableError("etcd watch: HTTP " + std::to_string(status)));
  };
  cb.on_data = [weak](std::string_view bytes) {
    auto s = weak.lock();
    if (!s) return;
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->active) return;
    s->buffer.append(bytes);
    s->Consume();
  };
  cb.on_done = [weak](Status status) {
    auto s = weak.lock();
    if (!s) return;
    std::lock_guard<std::mutex> lock(s->mu);
    s->Close(status.ok() ? UnavailableError("etcd watch: stream ended")
                         : UnavailableError("etcd watch: " + status.message()));
  };
  auto stream = http_->Stream(std::move(request), std::move(cb));
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->stream = stream;
  }
  return std::unique_ptr<EtcdWatch>(new HttpWatch(state));
}

}  // namespace tandem::etcd
