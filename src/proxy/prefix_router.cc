#include "proxy/prefix_router.h"

#include <chrono>

#include "common/logging.h"

namespace tandem::proxy {
namespace {

constexpr std::chrono::milliseconds kTokenizeTimeout{2000};

// The POST /tokenize body for a client body, or nullopt when it cannot be scored.
std::optional<Json> TokenizeBody(const Json& body, bool chat) {
  Json out = Json::object();
  if (auto model = body.find("model"); model != body.end() && model->is_string()) {
    out["model"] = *model;
  }
  if (chat) {
    auto messages = body.find("messages");
    if (messages == body.end() || !messages->is_array()) return std::nullopt;
    out["messages"] = *messages;
    for (const char* key : {"tools", "chat_template_kwargs", "add_generation_prompt",
                            "continue_final_message", "add_special_tokens"}) {
      if (auto it = body.find(key); it != body.end() && !it->is_null()) out[key] = *it;
    }
    return out;
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return std::nullopt;
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    out["prompt"] = (*prompt)[0];
  } else if (prompt->is_string()) {
    out["prompt"] = *prompt;
  } else {
    return std::nullopt;
  }
  if (auto it = body.find("add_special_tokens"); it != body.end() && it->is_boolean()) {
    out["add_special_tokens"] = *it;
  }
  return out;
}

// A completion prompt given as token ids (one prompt), or nullopt.
std::optional<std::vector<int32_t>> TokenIdPrompt(const Json& body) {
  auto prompt = body.find("prompt");
  if (prompt == body.end() || !prompt->is_array() || prompt->empty()) return std::nullopt;
  const Json& ids = (*prompt)[0].is_array() && prompt->size() == 1 ? (*prompt)[0] : *prompt;
  std::vector<int32_t> out;
  for (const Json& t : ids) {
    if (!t.is_number_integer()) return std::nullopt;
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v > INT32_MAX) return std::nullopt;
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

}  // namespace

int64_t PrefixScore::CachedOn(const Backend& backend) const {
  auto it = cached_tokens.find(backend.address().Key());
  return it == cached_tokens.end() ? 0 : it->second;
}

StatusOr<std::unique_ptr<PrefixRouter>> PrefixRouter::Create(const ProxyOptions& options,
                                                             BackendRegistry* registry,
                                                             BackendIo* io,
                                                             MetricsRegistry* metrics) {
  std::unique_ptr<PrefixRouter> router(new PrefixRouter(registry, io));
  const std::vector<BackendAddress>& instances = RoutedInstances(options);
  const Role role = WorkerMode(options) ? Role::kWorker : Role::kPrefill;
  KvEventSubscriberOptions sub;
  sub.silence_timeout = options.kv_events_silence_timeout;
  std::unordered_map<int, std::string> keys;
  for (size_t i = 0; i < options.kv_events_endpoints.size() && i < instances.size(); ++i) {
    if (options.kv_events_endpoints[i].empty()) continue;
    const int id = static_cast<int>(i);
    const std::string key = instances[i].Key();
    router->instance_ids_[key] = id;
    keys[id] = key;
    const std::string replay = i < options.kv_events_replay_endpoints.size()
                                   ? options.kv_events_replay_endpoints[i]
                                   : std::string();
    sub.sources.push_back(
        {id, key, options.kv_events_endpoints[i], options.kv_events_topic, replay});
  }
  sub.is_up = [registry, role, keys](int id) {
    auto key = keys.find(id);
    if (key == keys.end()) return false;
    for (const BackendInfo& info : registry->Snapshot()) {
      if (info.role == role && info.address.Key() == key->second) {
        return info.state == Backend::State::kUp;
      }
    }
    return false;  // removed
  };
  TANDEM_ASSIGN_OR_RETURN(router->subscriber_,
                          KvEventSubscriber::Create(std::move(sub), &router->index_, metrics));
  return router;
}

PrefixRouter::~PrefixRouter() { Stop(); }

void PrefixRouter::Start() {
  if (subscriber_) subscriber_->Start();
}

void PrefixRouter::Stop() {
  if (subscriber_) subscriber_->Stop();  // null when Create failed
}

void PrefixRouter::Score(Role role, const Json& body, bool chat, const std::string& authorization,
                         std::function<void(PrefixScore)> done) {
  PrefixScore score;
  score.prompt_tokens = EstimatePromptTokens(body);
  if (body.contains("cache_salt")) return done(std::move(score));  // not scored
  if (index_.num_blocks() == 0) {
    score.scored = true;  // nothing cached anywhere
    return done(std::move(score));
  }
  if (!chat) {
    if (std::optional<std::vector<int32_t>> ids = TokenIdPrompt(body)) {
      return Finish(*ids, std::move(score), done);
    }
  }
  std::optional<Json> request_body = TokenizeBody(body, chat);
  if (!request_body) return done(std::move(score));
  // The least-loaded up instance of the role tokenizes (they serve the same model).
  std::optional<BackendInfo> tokenizer;
  for (const BackendInfo& info : registry_->Snapshot()) {
    if (info.role != role || info.state != Backend::State::kUp || info.draining) continue;
    if (!tokenizer || info.load < tokenizer->load) tokenizer = info;
  }
  if (!tokenizer) return done(std::move(score));
  net::HttpClientRequest request;
  request.method = "POST";
  request.host = tokenizer->address.host;
  request.port = tokenizer->address.port;
  request.target = "/tokenize";
  request.body = DumpJson(*request_body);
  request.timeout = kTokenizeTimeout;
  request.headers.Set("Content-Type", "application/json");
  if (!authorization.empty()) request.headers.Set("Authorization", authorization);
  auto shared_done = std::make_shared<std::function<void(PrefixScore)>>(std::move(done));
  auto shared_score = std::make_shared<PrefixScore>(std::move(score));
  BackendPtr tokenizer_backend;
  for (const BackendPtr& b : registry_->InState(Backend::State::kUp)) {
    if (b->role() == role && b->address() == tokenizer->address) tokenizer_backend = b;
  }
  auto started = io_->Fetch(std::move(request), [this, shared_done, shared_score,
                                                 tokenizer_backend](StatusOr<net::HttpResponse> r) {
    // A call that failed in transport marks the instance down, as any other call does
    // (its events, if any, are then dropped too). A slow answer does not: a busy engine
    // may take over kTokenizeTimeout and is still up.
    if (!r.ok() && r.status().code() != StatusCode::kCancelled &&
        r.status().code() != StatusCode::kDeadlineExceeded && tokenizer_backend) {
      registry_->MarkDown(tokenizer_backend);
    }
    std::vector<int32_t> tokens;
    bool ok = r.ok() && r->status == 200;
    if (ok) {
      Json answer = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      auto it = answer.is_object() ? answer.find("tokens") : answer.end();
      ok = answer.is_object() && it != answer.end() && it->is_array();
      if (ok) {
        for (const Json& t : *it) {
          if (!t.is_number_integer()) {
            ok = false;
            break;
          }
          tokens.push_back(t.get<int32_t>());
        }
      }
    }
    if (!ok) {
      TANDEM_LOG(DEBUG) << "prefix routing: /tokenize failed: "
                        << (r.ok() ? std::to_string(r->status) : r.status().ToString());
      return (*shared_done)(std::move(*shared_score));
    }
    Finish(tokens, std::move(*shared_score), *shared_done);
  });
  if (!started) {
    // Closed: Fetch never calls back.
    (*shared_done)(std::move(*shared_score));
  }
}

void PrefixRouter::Finish(const std::vector<int32_t>& tokens, PrefixScore score,
                          const std::function<void(PrefixScore)>& done) const {
  score.scored = true;
  score.prompt_tokens = static_cast<int64_t>(tokens.size());
  for (const PrefixIndex::Match& m : index_.MatchPrefix(tokens)) {
    for (const auto& [key, id] : instance_ids_) {
      if (id == m.instance) score.cached_tokens[key] = m.cached_tokens;
    }
  }
  done(std::move(score));
}

void PrefixRouter::Routed(const Backend& backend, const PrefixScore& score, int64_t cached_tokens) {
  auto it = instance_ids_.find(backend.address().Key());
  if (it == instance_ids_.end()) return;
  const int64_t block_size = index_.block_size(it->second);
  // An instance never seen publishing has no block size yet: any real prompt stores.
  if (score.prompt_tokens - cached_tokens >= std::max<int64_t>(block_size, 1)) {
    subscriber_->ExpectEvents(it->second);
  }
}

}  // namespace tandem::proxy
