#include "proxy/pd_request.h"

#include <mutex>
#include <optional>
#include <vector>

#include "common/logging.h"
#include "net/openai_error.h"
#include "net/sse.h"
#include "proxy/decode_output_filter.h"
#include "proxy/json_span.h"
#include "proxy/prefix_router.h"

namespace tandem::proxy {
namespace {

// A decoder may give a request back at most this often before the proxy gives up.
constexpr int kMaxRecomputes = 8;
// Bound on a buffered backend answer (prefill JSON, non-streamed decode, error bodies).
constexpr size_t kMaxBufferedBytes = 256u << 20;
// new tokens assumed when the request sets no bound (for the decode load estimate)
constexpr int64_t kDefaultNewTokens = 256;

using WriterPtr = std::shared_ptr<net::HttpResponseWriter>;

class PdRequest : public std::enable_shared_from_this<PdRequest> {
 public:
  PdRequest(ProxyContext* ctx, PdRequestParams params, WriterPtr writer)
      : ctx_(ctx), p_(std::move(params)), writer_(std::move(writer)) {
    chat_ = p_.target.find("chat") != std::string::npos;
    auto stream = p_.body.find("stream");
    stream_ = stream != p_.body.end() && stream->is_boolean() && stream->get<bool>();
    segment_body_ = p_.body;
    segment_raw_ = p_.raw_body;
    worker_mode_ = WorkerMode(*ctx_->options);
    SetLoads();
  }

  void Start() {
    ctx_->metrics->RequestStarted();
    // Weak: the writer holds the callback, and the request holds the writer.
    std::weak_ptr<PdRequest> weak = weak_from_this();
    writer_->OnClose([weak] {
      if (auto self = weak.lock()) self->OnClientClosed();
    });
    if (ctx_->router != nullptr && ctx_->options->routing_policy == RoutingPolicy::kPrefixAware) {
      // Outside the lock: the callback may run inline.
      auto self = shared_from_this();
      ctx_->router->Score(RoutedRole(), p_.body, chat_, p_.authorization,
                          [self](PrefixScore score) {
                            std::lock_guard<std::mutex> lock(self->mu_);
                            self->score_ = std::move(score);
                            self->StartRoutedLocked();
                          });
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    StartRoutedLocked();
  }

 private:
  // ---- routing ----

  Role RoutedRole() const { return worker_mode_ ? Role::kWorker : Role::kPrefill; }

  // The first phase of a segment: prefill in PD mode, the worker otherwise.
  void StartRoutedLocked() { worker_mode_ ? StartDecodeLocked() : StartPrefillLocked(); }

  // Picks the routed phase's instance by the policy, and accounts for the decision.
  BackendPtr PickRoutedLocked(Role role, int64_t load, const std::vector<BackendPtr>& tried) {
    const ProxyOptions& o = *ctx_->options;
    std::function<int64_t(const Backend&)> cached;
    if (score_.scored) cached = [this](const Backend& b) { return score_.CachedOn(b); };
    BackendRegistry::Routed routed = ctx_->registry->PickRouted(role, load, tried, o.routing_policy,
                                                                o.prefix_load_threshold, cached);
    if (!routed.backend) return nullptr;
    ctx_->metrics->RouteDecided(routed.reason);
    if (score_.scored && segment_ == 0) {
      predicted_cached_ = routed.cached_tokens;
      ctx_->router->Routed(*routed.backend, score_, routed.cached_tokens);
    }
    return routed.backend;
  }

  // The engine's cached_tokens for a scored request, beside the prediction (once).
  void ReportPrefixLocked(std::optional<int64_t> reported) {
    if (!score_.scored || segment_ != 0 || prefix_reported_ || !reported) return;
    prefix_reported_ = true;
    ctx_->metrics->PrefixOutcome(predicted_cached_, *reported, score_.prompt_tokens);
  }

  // ---- prefill ----

  void StartPrefillLocked() {
    if (finished_) return;
    prefiller_ = PickRoutedLocked(Role::kPrefill, prompt_tokens_, p_tried_);
    if (!prefiller_ && overload_status_ != 0) return FailLocked(overload_status_, overload_error_);
    if (!prefiller_) return FailLocked(503, "no prefill instance available");
    prefill_held_ = true;
    p_tried_.push_back(prefiller_);
    net::HttpClientRequest request =
        BackendRequest(prefiller_, p_.target, PrefillBody(segment_body_));
    auto self = shared_from_this();
    auto response = std::make_shared<net::HttpResponse>();
    net::HttpStreamCallbacks callbacks;
    callbacks.on_headers = [response](int status, const net::HttpHeaders& headers) {
      response->status = status;
      response->headers = headers;
    };
    callbacks.on_data = [response](std::string_view bytes) {
      if (response->body.size() < kMaxBufferedBytes) response->body.append(bytes);
    };
    callbacks.on_done = [self, response](Status status) {
      self->OnPrefillDone(std::move(status), std::move(*response));
    };
    p_call_ = ctx_->io->Stream(std::move(request), std::move(callbacks));
    if (!p_call_) return FailLocked(503, "the proxy is shutting down");
  }

  void OnPrefillDone(Status status, net::HttpResponse response) {
    std::lock_guard<std::mutex> lock(mu_);
    p_call_.reset();
    ReleasePrefillLocked();
    if (finished_) {
      // The client left while the prefiller was answering: free what it pinned.
      if (status.ok() && response.status == 200) {
        ParsePrefillAnswerLocked(response.body);
        SendAbortLocked();
      }
      return;
    }
    if (!status.ok()) {
      ctx_->registry->MarkDown(prefiller_);
      return RetryPrefillLocked(
          status.code() == StatusCode::kDeadlineExceeded ? 504 : 502,
          "prefill instance " + prefiller_->address().Key() + " failed: " + status.message());
    }
    if (IsOverload(response.status)) {
      // Busy, not broken: the instance stays up; another one may have room.
      return RetryPrefillLocked(response.status, OverloadLocked(response.status, "prefill instance " +
                                                                                 prefiller_->address().Key()));
    }
    if (response.status >= 500) {
      ctx_->registry->MarkDown(prefiller_);
      return RetryPrefillLocked(502, "prefill instance " + prefiller_->address().Key() +
                                         " answered " + std::to_string(response.status));
    }
    if (response.status != 200) return PassThroughLocked(response.status, response.body);
    if (!ParsePrefillAnswerLocked(response.body)) {
      return RetryPrefillLocked(
          502, "prefill instance " + prefiller_->address().Key() + " answered with no JSON object");
    }
    ReportPrefixLocked(cached_tokens_);
    StartDecodeLocked();
  }

  // Reads kv_transfer_params and cached_tokens from the prefiller's answer.
  bool ParsePrefillAnswerLocked(const std::string& body) {
    Json answer = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!answer.is_object()) return false;
    kv_params_.clear();
    remote_request_id_.clear();
    abort_sent_ = false;
    kv_owner_ = prefiller_;
    if (std::optional<std::string_view> kv = JsonValueText(body, {"kv_transfer_params"});
        kv && !kv->empty() && kv->front() == '{') {
      kv_params_ = std::string(*kv);
      const Json& params = answer["kv_transfer_params"];
      if (auto id = params.find("remote_request_id"); id != params.end() && id->is_string()) {
        remote_request_id_ = id->get<std::string>();
      }
    }
    cached_tokens_ = JsonIntAt(body, {"usage", "prompt_tokens_details", "cached_tokens"});
    return true;
  }

  void RetryPrefillLocked(int http_status, std::string error) {
    TANDEM_LOG(WARNING) << "request " << p_.request_id << ": " << error;
    if (++p_attempts_ >= std::max(1, ctx_->options->max_retries)) {
      return FailLocked(http_status, error);
    }
    ctx_->metrics->Retried(Role::kPrefill);
    auto self = shared_from_this();
    if (!ctx_->io->RunAfter(RetryDelay(*ctx_->options, p_attempts_), [self] {
          std::lock_guard<std::mutex> lock(self->mu_);
          self->StartPrefillLocked();
        })) {
      FailLocked(503, "the proxy is shutting down");
    }
  }

  // ---- decode ----

  void StartDecodeLocked() {
    if (finished_) return;
    decoder_ = worker_mode_ ? PickRoutedLocked(Role::kWorker, decode_load_, d_tried_)
                            : ctx_->registry->Pick(Role::kDecode, decode_load_, d_tried_);
    if (!decoder_) {
      SendAbortLocked();
      if (overload_status_ != 0) return FailLocked(overload_status_, overload_error_);
      return FailLocked(
          503, worker_mode_ ? "no worker instance available" : "no decode instance available");
    }
    decode_held_ = true;
    d_tried_.push_back(decoder_);
    d_status_ = 0;
    d_sent_ = false;
    d_body_.clear();
    d_content_type_.clear();
    filter_ = std::make_unique<DecodeOutputFilter>(cached_tokens_, segment_ > 0);
    net::HttpClientRequest request =
        BackendRequest(decoder_, p_.target, DecodeBody(segment_raw_, segment_body_, kv_params_));
    auto self = shared_from_this();
    net::HttpStreamCallbacks callbacks;
    callbacks.on_sent = [self] {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->d_sent_ = true;
    };
    callbacks.on_headers = [self](int status, const net::HttpHeaders& headers) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->d_status_ = status;
      self->d_content_type_ = headers.GetOr("Content-Type", "");
    };
    callbacks.on_data = [self](std::string_view bytes) { self->OnDecodeData(bytes); };
    callbacks.on_done = [self](Status status) { self->OnDecodeDone(std::move(status)); };
    d_call_ = ctx_->io->Stream(std::move(request), std::move(callbacks));
    if (!d_call_) {
      SendAbortLocked();
      FailLocked(503, "the proxy is shutting down");
    }
  }

  void OnDecodeData(std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || filter_->recomputed()) return;
    if (d_status_ != 200 || !stream_) {
      if (d_body_.size() + bytes.size() > kMaxBufferedBytes) {
        if (d_call_) d_call_->Cancel();
        return;
      }
      d_body_.append(bytes);
      return;
    }
    std::string out = filter_->FeedStream(bytes);
    WriteToClientLocked(std::move(out));
    if (filter_->recomputed() && d_call_) d_call_->Cancel();  // the rest is re-routed
  }

  void OnDecodeDone(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    d_call_.reset();
    ReleaseDecodeLocked();
    if (finished_) return;
    const std::string where =
        std::string(RoleName(decoder_->role())) + " instance " + decoder_->address().Key();
    if (filter_->recomputed()) return RecomputeLocked();
    if (!status.ok()) {
      ctx_->registry->MarkDown(decoder_);
      const int code = status.code() == StatusCode::kDeadlineExceeded ? 504 : 502;
      return RetryDecodeLocked(code, where + " failed: " + status.message());
    }
    if (IsOverload(d_status_)) {
      return RetryDecodeLocked(d_status_, OverloadLocked(d_status_, where), /*refused=*/true);
    }
    if (d_status_ >= 500) {
      ctx_->registry->MarkDown(decoder_);
      return RetryDecodeLocked(502, where + " answered " + std::to_string(d_status_));
    }
    if (d_status_ != 200) {
      SendAbortLocked();
      return PassThroughLocked(d_status_, d_body_);
    }
    if (stream_) {
      WriteToClientLocked(filter_->FinishStream());
      if (filter_->recomputed()) return RecomputeLocked();
      if (!filter_->saw_done()) {
        return RetryDecodeLocked(502, where + " ended its stream without [DONE]");
      }
      if (worker_mode_) ReportPrefixLocked(filter_->reported_cached_tokens());
      FinishLocked(Outcome::kSuccess);  // counted before the client can see the end
      writer_->End();
      return;
    }
    if (d_body_.empty()) return RetryDecodeLocked(502, where + " answered 200 with no body");
    std::string body = filter_->FilterBody(std::move(d_body_));
    if (filter_->recomputed()) return RecomputeLocked();
    if (worker_mode_) ReportPrefixLocked(filter_->reported_cached_tokens());
    if (segment_ > 0) {
      body = DecodeOutputFilter::PrependSegments(std::move(body), chat_, earlier_text_,
                                                 earlier_tokens_);
    }
    FinishLocked(Outcome::kSuccess);
    writer_->SendResponse(200, ResponseHeaders("application/json"), std::move(body));
  }

  // A decode attempt failed: retry on another decoder while the client has seen
  // nothing, else end the stream with an error. Without retry_sent_requests, a request
  // the backend may have started (it was sent, and not refused as overloaded) ends too.
  void RetryDecodeLocked(int http_status, std::string error, bool refused = false) {
    TANDEM_LOG(WARNING) << "request " << p_.request_id << ": " << error;
    if (client_started_ || (d_sent_ && !refused && !ctx_->options->retry_sent_requests)) {
      SendAbortLocked();
      return FailLocked(http_status, error);
    }
    if (++d_attempts_ >= std::max(1, ctx_->options->max_retries)) {
      SendAbortLocked();
      return FailLocked(http_status, error);
    }
    ctx_->metrics->Retried(worker_mode_ ? Role::kWorker : Role::kDecode);
    auto self = shared_from_this();
    if (!ctx_->io->RunAfter(RetryDelay(*ctx_->options, d_attempts_), [self] {
          std::lock_guard<std::mutex> lock(self->mu_);
          self->StartDecodeLocked();
        })) {
      SendAbortLocked();
      FailLocked(503, "the proxy is shutting down");
    }
  }

  // The decoder gave the request back: route the rest of it from the prefill phase.
  void RecomputeLocked() {
    earlier_text_ += filter_->text();
    earlier_tokens_ += filter_->tokens();
    ctx_->metrics->Recomputed();
    if (++segment_ > kMaxRecomputes) {
      return FailLocked(
          502, "the request was recomputed more than " + std::to_string(kMaxRecomputes) + " times");
    }
    std::optional<Json> next = ContinuationBody(p_.body, chat_, earlier_text_, earlier_tokens_);
    if (!next) {
      if (client_started_) {
        return FailLocked(502, "the decoder gave the request back and it cannot be continued");
      }
      next = p_.body;  // nothing was sent: start over
      earlier_text_.clear();
      earlier_tokens_ = 0;
    }
    TANDEM_LOG(INFO) << "request " << p_.request_id << " recomputed by "
                     << decoder_->address().Key() << " after " << earlier_tokens_
                     << " tokens; re-routing";
    segment_body_ = std::move(*next);
    segment_raw_ = DumpJson(segment_body_);
    SetLoads();
    p_tried_.clear();
    d_tried_.clear();
    p_attempts_ = d_attempts_ = 0;
    kv_params_.clear();
    remote_request_id_.clear();
    StartRoutedLocked();
  }

  // ---- client ----

  void OnClientClosed() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (p_call_) p_call_->Cancel();
    if (d_call_) d_call_->Cancel();
    SendAbortLocked();
    TANDEM_LOG(INFO) << "request " << p_.request_id << ": client disconnected";
    FinishLocked(Outcome::kCancelled);
  }

  void WriteToClientLocked(std::string bytes) {
    if (bytes.empty()) return;
    if (!client_started_) {
      const std::string type = d_content_type_.empty() ? "text/event-stream" : d_content_type_;
      writer_->StartStream(200, ResponseHeaders(type));
      client_started_ = true;
    }
    writer_->Write(std::move(bytes));
  }

  // A backend's 4xx: the client's request was wrong; answer with the backend's words.
  void PassThroughLocked(int status, const std::string& body) {
    FinishLocked(Outcome::kClientError);
    Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("error")) {
      writer_->SendResponse(status, ResponseHeaders("application/json"), body);
    } else {
      net::SendError(*writer_, status, body.empty() ? net::HttpReasonPhrase(status) : body);
    }
  }

  void FailLocked(int status, const std::string& message) {
    if (finished_) return;
    TANDEM_LOG(WARNING) << "request " << p_.request_id << " failed: " << message;
    FinishLocked(Outcome::kFailed);
    if (client_started_) {
      writer_->Write(net::SseEvent(net::OpenAiErrorJson(status, message)));
      writer_->Write(net::SseEvent("[DONE]"));
      writer_->End();
    } else {
      net::SendError(*writer_, status, message);
    }
  }

  // Ends the request's accounting (loads, metrics); called before the last bytes go out,
  // so that a client that got its answer sees it counted.
  void FinishLocked(Outcome outcome) {
    if (finished_) return;
    finished_ = true;
    ReleasePrefillLocked();
    ReleaseDecodeLocked();
    ctx_->metrics->RequestFinished(outcome);
  }

  // ---- helpers ----

  // 503 (queue full) and 429 are an instance saying it is busy: it is not marked down,
  // and when no other instance takes the request the client gets the same status.
  static bool IsOverload(int status) { return status == 503 || status == 429; }

  std::string OverloadLocked(int status, const std::string& where) {
    overload_status_ = status;
    overload_error_ = "every instance is overloaded (" + where + " answered " + std::to_string(status) +
                      "); retry later";
    return overload_error_;
  }

  // Tells the prefiller that answered with kv_transfer_params to free its blocks.
  void SendAbortLocked() {
    if (kv_params_.empty() || remote_request_id_.empty() || abort_sent_ || !kv_owner_) return;
    abort_sent_ = true;
    ctx_->metrics->KvAborted();
    net::HttpClientRequest request = BackendRequest(
        kv_owner_, "/kv_transfer/abort", DumpJson(Json{{"remote_request_id", remote_request_id_}}));
    request.timeout = std::chrono::seconds(5);
    request.idle_timeout = std::chrono::milliseconds(0);
    std::string id = remote_request_id_;
    std::string where = kv_owner_->address().Key();
    ctx_->io->Fetch(std::move(request), [id, where](StatusOr<net::HttpResponse> r) {
      TANDEM_LOG(DEBUG) << "kv_transfer/abort " << id << " at " << where << ": "
                        << (r.ok() ? std::to_string(r->status) + " " + r->body
                                   : r.status().ToString());
    });
  }

  net::HttpClientRequest BackendRequest(const BackendPtr& backend, const std::string& target,
                                        std::string body) const {
    net::HttpClientRequest request;
    request.method = "POST";
    request.host = backend->address().host;
    request.port = backend->address().port;
    request.target = target;
    request.body = std::move(body);
    request.timeout = std::chrono::milliseconds(0);  // generation has no natural bound
    request.idle_timeout = ctx_->options->backend_idle_timeout;
    request.headers.Set("Content-Type", "application/json");
    request.headers.Set("X-Request-Id", segment_ == 0
                                            ? p_.request_id
                                            : p_.request_id + "-r" + std::to_string(segment_));
    if (!p_.authorization.empty()) request.headers.Set("Authorization", p_.authorization);
    return request;
  }

  net::HttpHeaders ResponseHeaders(const std::string& content_type) const {
    return {{"Content-Type", content_type}, {"X-Request-Id", p_.request_id}};
  }

  void SetLoads() {
    prompt_tokens_ = EstimatePromptTokens(segment_body_);
    decode_load_ = prompt_tokens_ + MaxNewTokens(segment_body_, kDefaultNewTokens);
  }

  void ReleasePrefillLocked() {
    if (!prefill_held_) return;
    prefill_held_ = false;
    ctx_->registry->Release(prefiller_, prompt_tokens_);
  }

  void ReleaseDecodeLocked() {
    if (!decode_held_) return;
    decode_held_ = false;
    ctx_->registry->Release(decoder_, decode_load_);
  }

  ProxyContext* const ctx_;
  const PdRequestParams p_;
  const WriterPtr writer_;
  bool chat_ = false;
  bool stream_ = false;
  bool worker_mode_ = false;  // --worker-urls: one phase, no PD

  std::mutex mu_;  // guards everything below
  bool finished_ = false;
  // The current segment (a new one after each "recomputed").
  int segment_ = 0;
  Json segment_body_;
  std::string segment_raw_;
  int64_t prompt_tokens_ = 0;  // estimated; the prefiller's load
  int64_t decode_load_ = 0;    // estimated prompt + new tokens; the decoder's load
  std::string earlier_text_;   // generated by earlier segments
  int64_t earlier_tokens_ = 0;
  // Routing (prefix_aware): the score of the first segment, the chosen instance's
  // predicted cached tokens, and whether the engine's figure was counted.
  PrefixScore score_;
  int64_t predicted_cached_ = 0;
  bool prefix_reported_ = false;
  // Prefill phase.
  BackendPtr prefiller_;
  bool prefill_held_ = false;  // prefiller_ is charged prompt_tokens_
  std::vector<BackendPtr> p_tried_;
  int p_attempts_ = 0;  // failed attempts
  std::shared_ptr<net::HttpClientStream> p_call_;
  // The prefiller's answer.
  BackendPtr kv_owner_;
  std::string kv_params_;  // raw JSON object, "" when the prefiller is no producer
  std::string remote_request_id_;
  std::optional<int64_t> cached_tokens_;
  bool abort_sent_ = false;
  // Decode phase.
  BackendPtr decoder_;
  bool decode_held_ = false;
  std::vector<BackendPtr> d_tried_;
  int d_attempts_ = 0;
  std::shared_ptr<net::HttpClientStream> d_call_;
  int d_status_ = 0;
  bool d_sent_ = false;  // this decode attempt's backend may have the request (on_sent)
  int overload_status_ = 0;       // the last busy answer (503/429) of a backend, 0 if none
  std::string overload_error_;
  std::string d_content_type_;
  std::string d_body_;  // non-streamed or error answers
  std::unique_ptr<DecodeOutputFilter> filter_;
  // Client side.
  bool client_started_ = false;  // the stream's head (and bytes) went out
};

}  // namespace

void StartPdRequest(ProxyContext* context, PdRequestParams params,
                    std::shared_ptr<net::HttpResponseWriter> writer) {
  auto request = std::make_shared<PdRequest>(context, std::move(params), std::move(writer));
  request->Start();
}

}  // namespace tandem::proxy
