#include "engine/spec_decode.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "engine/draft_model_proposer.h"
#include "engine/kv_arena.h"
#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"
#include "engine/request.h"
#include "engine/spec_decode_metrics.h"
#include "model/model.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

Status ReadInt(const Json& j, const char* key, int lo, int hi, int* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return InvalidArgumentError("--speculative-config: " + std::string(key) + " must be an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<int>(it->get<int64_t>());
  return Status::Ok();
}

}  // namespace

StatusOr<SpeculativeOptions> ParseSpeculativeConfig(const std::string& json, std::string* unsupported) {
  SpeculativeOptions o;
  if (json.empty()) return o;
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError("--speculative-config: expected a JSON object");
  // Other vLLM keys (enforce_eager: CUDA graphs; draft tensor parallelism, ...) have no
  // meaning here: accepted, and said so (the caller logs it).
  std::string ignored;
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* kUsed[] = {"method", "model", "num_speculative_tokens", "prompt_lookup_min",
                                  "prompt_lookup_max"};
    if (std::find(std::begin(kUsed), std::end(kUsed), it.key()) != std::end(kUsed)) continue;
    ignored += (ignored.empty() ? "" : ", ") + it.key();
  }
  if (!ignored.empty()) *unsupported = "keys without effect on CPU (ignored): " + ignored;
  std::string method;
  if (auto it = j.find("method"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidArgumentError("--speculative-config: method must be a string");
    method = it->get<std::string>();
  }
  std::string model;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidArgumentError("--speculative-config: model must be a path");
    model = it->get<std::string>();
  }
  // vLLM: a "model" without a method is a draft model; "[ngram]" the old spelling.
  if (method.empty()) method = model == "[ngram]" ? "ngram" : model.empty() ? "" : "draft_model";
  if (method.empty()) return InvalidArgumentError("--speculative-config: method is required");
  int k = 0;
  TANDEM_RETURN_IF_ERROR(ReadInt(j, "num_speculative_tokens", 1, 16, &k));
  if (k == 0) return InvalidArgumentError("--speculative-config: num_speculative_tokens is required (1..16)");
  if (method == "ngram") {
    int lo = 0;
    int hi = 0;
    TANDEM_RETURN_IF_ERROR(ReadInt(j, "prompt_lookup_min", 1, 1 << 16, &lo));
    TANDEM_RETURN_IF_ERROR(ReadInt(j, "prompt_lookup_max", 1, 1 << 16, &hi));
    // vLLM's defaults: 5 and 5; one given sets the other.
    if (lo == 0 && hi == 0) lo = hi = 5;
    if (lo == 0) lo = hi;
    if (hi == 0) hi = lo;
    if (lo > hi) {
      return InvalidArgumentError("--speculative-config: prompt_lookup_min (" + std::to_string(lo) +
                                  ") must not exceed prompt_lookup_max (" + std::to_string(hi) + ")");
    }
    o.method = SpeculativeOptions::Method::kNgram;
    o.num_speculative_tokens = k;
    o.prompt_lookup_min = lo;
    o.prompt_lookup_max = hi;
    return o;
  }
  if (method == "draft_model") {
    if (model.empty()) return InvalidArgumentError("--speculative-config: model (the draft GGUF) is required");
    if (!std::filesystem::exists(model)) {
      return InvalidArgumentError("--speculative-config: model " + model + " does not exist");
    }
    o.method = SpeculativeOptions::Method::kDraftModel;
    o.num_speculative_tokens = k;
    o.draft_model = model;
    return o;
  }
  for (const char* mtp : {"mtp", "deepseek_mtp", "glm4_moe_mtp"}) {
    if (method == mtp) {
      o.method = SpeculativeOptions::Method::kMtp;
      o.num_speculative_tokens = k;
      return o;
    }
  }
  return InvalidArgumentError("--speculative-config: unknown method \"" + method +
                              "\" (supported: ngram, draft_model, mtp, deepseek_mtp, glm4_moe_mtp)");
}

std::vector<int32_t> NgramProposer::Propose(std::span<const int32_t> tokens, int k) const {
  const int n_tokens = static_cast<int>(tokens.size());
  for (int n = std::min(max_n_, n_tokens - 1); n >= min_n_; --n) {
    const int32_t* suffix = tokens.data() + n_tokens - n;
    // The earliest occurrence with at least one token after it (vLLM's choice): in a
    // repetition loop the latest one is the suffix shifted by a token or two, which would
    // leave room for only that many proposals.
    for (int start = 0; start < n_tokens - n; ++start) {
      if (!std::equal(suffix, suffix + n, tokens.data() + start)) continue;
      const int from = start + n;
      const int count = std::min(k, n_tokens - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

StatusOr<std::unique_ptr<SpecDecoder>> SpecDecoder::Create(const EngineOptions& o, const Model& model,
                                                          KvArena* arena, kv::KvCacheManager* kv,
                                                          ThreadPool* threads, MetricsRegistry* registry) {
  std::unique_ptr<DraftModelProposer> draft;
  if (o.speculative.method == SpeculativeOptions::Method::kDraftModel) {
    // Its cache holds as many tokens as the target's.
    TANDEM_ASSIGN_OR_RETURN(draft, DraftModelProposer::Create(o.speculative.draft_model, model, arena->num_blocks(),
                                                              o.block_size, o.max_num_batched_tokens, threads));
  }
  std::unique_ptr<MtpProposer> mtp;
  if (o.speculative.method == SpeculativeOptions::Method::kMtp) {
    mtp = std::make_unique<MtpProposer>(model.config(), model.weights(), threads, arena, kv);
  }
  return std::make_unique<SpecDecoder>(o.speculative, o.max_model_len, std::move(draft), std::move(mtp), registry,
                                       o.model_name, o.engine_index);
}

SpecDecoder::SpecDecoder(const SpeculativeOptions& options, int max_model_len,
                         std::unique_ptr<DraftModelProposer> draft, std::unique_ptr<MtpProposer> mtp,
                         MetricsRegistry* registry, const std::string& model_name, int engine_index)
    : num_speculative_tokens_(options.num_speculative_tokens),
      max_model_len_(max_model_len),
      proposer_(options.prompt_lookup_min, options.prompt_lookup_max),
      draft_(std::move(draft)),
      mtp_(std::move(mtp)),
      metrics_(std::make_unique<SpecDecodeMetrics>(registry, model_name, options.num_speculative_tokens,
                                                   engine_index)) {}

SpecDecoder::~SpecDecoder() = default;

void SpecDecoder::Propose(const std::vector<Request*>& running) {
  for (Request* r : running) r->spec_tokens.clear();  // drafts of a step that did not run them are stale
  if (!controller_.ShouldDraft()) return;
  std::vector<DraftModelProposer::Slot> slots;
  for (Request* r : running) {
    const int n_tokens = static_cast<int>(r->tokens.size());
    if (r->num_computed_tokens != n_tokens - 1 || !r->spec_adaptivity.ShouldPropose()) continue;
    // The last token of a request is always drawn, never drafted.
    const int room = std::min(r->max_tokens - r->num_output_tokens() - 1, max_model_len_ - n_tokens - 1);
    if (room <= 0) continue;
    const int k = std::min(num_speculative_tokens_, room);
    if (draft_) {
      slots.push_back({r, k});
    } else if (mtp_) {
      mtp_->Reserve(r, k);
    } else {
      r->spec_tokens = proposer_.Propose(r->tokens, k);
    }
  }
  if (!slots.empty()) draft_->Propose(slots);
}

void SpecDecoder::AfterSchedule(const std::vector<ScheduledRequest>& scheduled) {
  if (mtp_) mtp_->FillDrafts(scheduled);
}

void SpecDecoder::AfterForward(const std::vector<ScheduledRequest>& scheduled, const StepLogits& logits) {
  if (mtp_) mtp_->AfterForward(scheduled, logits.hidden, logits.first_token);
}

void SpecDecoder::OnFork(const std::string& parent, const std::string& child) {
  if (mtp_) mtp_->Fork(parent, child);
}

void SpecDecoder::OnFinished(const std::string& request_id) {
  if (draft_) draft_->Release(request_id);
  if (mtp_) mtp_->Release(request_id);
}

void SpecDecoder::OnVerified(Request* r, int drafted, int accepted) {
  metrics_->OnDraft(drafted, accepted);
  controller_.OnVerified(drafted, accepted);
  if (r != nullptr) r->spec_adaptivity.Record(drafted, accepted);
  if (r != nullptr && mtp_) mtp_->OnVerified(*r, accepted);
}

void SpecDecoder::MaybeLog() { metrics_->MaybeLog(); }

bool SpecController::ShouldDraft() const {
  // While on: the last kProbeSteps of each period go without drafts (refreshing the
  // baseline); while off: the last kProbeSteps of the period draft (refreshing the rest).
  const bool probe = phase_ >= kOffSteps - kProbeSteps;
  return on_ != probe;
}

void SpecController::OnDecodeStep(bool drafted, int tokens, double seconds) {
  if (tokens > 0) {
    constexpr double kWeight = 0.2;
    double& avg = drafted ? with_ : without_;
    const double per_token = seconds / tokens;
    avg = avg == 0 ? per_token : (1 - kWeight) * avg + kWeight * per_token;
  }
  if (++phase_ < kOffSteps) return;
  phase_ = 0;
  // Both measured: draft while it is at least as fast per token.
  if (with_ > 0 && without_ > 0 && on_ != (with_ <= without_)) {
    on_ = with_ <= without_;
    char line[320];
    std::snprintf(line, sizeof(line),
                  "speculative decoding: drafting %s: %.2f ms per output token with drafts, %.2f ms without "
                  "(moving averages of decode-only steps); %.1f%% of %lld draft tokens accepted in the last "
                  "%d steps; %s",
                  on_ ? "on" : "off", 1e3 * with_, 1e3 * without_,
                  period_drafted_ > 0 ? 100.0 * period_accepted_ / period_drafted_ : 0.0,
                  static_cast<long long>(period_drafted_), kOffSteps,
                  on_ ? "drafts pay again" : "drafts cost more than they save; probing a few steps per period");
    TANDEM_LOG(INFO) << line;
  }
  period_drafted_ = 0;
  period_accepted_ = 0;
}

void SpecController::OnVerified(int drafted, int accepted) {
  period_drafted_ += drafted;
  period_accepted_ += accepted;
}

bool SpecAdaptivity::ShouldPropose() {
  if (cool_off_ > 0) {
    --cool_off_;
    return false;
  }
  return true;
}

void SpecAdaptivity::Record(int drafted, int accepted) {
  window_drafted_ += drafted;
  window_accepted_ += accepted;
  if (window_drafted_ < kWindowTokens) return;
  if (window_accepted_ < kMinAcceptance * window_drafted_) cool_off_ = kCoolOffSteps;
  window_drafted_ = 0;
  window_accepted_ = 0;
}

}  // namespace tandem
