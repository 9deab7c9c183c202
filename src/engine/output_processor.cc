#include "engine/output_processor.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/engine_metrics.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

// Largest n <= len such that text[0, n) does not end inside a UTF-8 sequence.
size_t Utf8Boundary(const std::string& text, size_t len) {
  while (len > 0 && len < text.size() && (static_cast<unsigned char>(text[len]) & 0xC0) == 0x80) --len;
  return len;
}

size_t MaxStopLength(const GenerationParams& p) {
  size_t n = 0;
  for (const std::string& s : p.stop) n = std::max(n, s.size());
  return n;
}

}  // namespace

std::optional<std::string> OutputProcessor::AppendToken(Request& r, int32_t token, const TokenLogprob* logprob) {
  r.tokens.push_back(token);
  ++r.output_counts[token];
  const GenerationParams& p = r.params;
  const bool past_min = r.num_output_tokens() >= p.min_tokens;

  if (past_min && !p.ignore_eos && tokenizer_.IsEog(token)) {
    // The EOS token ends the request and is not part of the text.
    r.pending_tokens.push_back(token);
    if (logprob) r.pending_logprobs.push_back(*logprob);
    return "stop";
  }
  if (past_min && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end()) {
    r.pending_tokens.push_back(token);
    if (logprob) r.pending_logprobs.push_back(*logprob);
    r.stop_reason = std::to_string(token);
    return "stop";
  }

  r.pending_tokens.push_back(token);
  if (logprob) r.pending_logprobs.push_back(*logprob);
  r.pending_text += r.utf8.Push(tokenizer_.TokenToPiece(token, /*special=*/!p.skip_special_tokens));

  if (!p.stop.empty() && past_min) {
    size_t best = std::string::npos;
    const std::string* matched = nullptr;
    for (const std::string& s : p.stop) {
      if (s.empty()) continue;
      size_t pos = r.pending_text.find(s);
      if (pos != std::string::npos && pos < best) {
        best = pos;
        matched = &s;
      }
    }
    if (matched != nullptr) {
      r.pending_text.resize(best + (p.include_stop_str_in_output ? matched->size() : 0));
      r.stop_reason = *matched;
      r.utf8.Flush();  // anything incomplete came after the stop string
      return "stop";
    }
  }
  if (r.num_output_tokens() >= r.max_tokens) return "length";
  return std::nullopt;
}

RequestOutput OutputProcessor::TakeOutput(Request& r, const std::string& finish_reason) {
  RequestOutput out;
  out.request_id = r.id;
  const bool finished = !finish_reason.empty();
  if (finished && r.stop_reason.empty()) r.pending_text += r.utf8.Flush();
  size_t send = r.pending_text.size();
  if (!finished) {
    // Hold back a tail that could still grow into a stop string.
    const size_t hold = MaxStopLength(r.params);
    send = hold > 1 ? (send > hold - 1 ? send - (hold - 1) : 0) : send;
    send = Utf8Boundary(r.pending_text, send);
  }
  out.new_text = r.pending_text.substr(0, send);
  r.pending_text.erase(0, send);
  out.new_tokens.swap(r.pending_tokens);
  out.new_logprobs.swap(r.pending_logprobs);
  out.finished = finished;
  out.finish_reason = finish_reason;
  out.stop_reason = r.stop_reason;
  out.prompt_tokens = r.prompt_len;
  out.completion_tokens = r.num_output_tokens();
  out.cached_tokens = std::max(0, r.num_cached_tokens);
  return out;
}

EmitResult OutputProcessor::Emit(Request& r, int32_t token, const TokenLogprob* lp) {
  metrics_->OnToken(&r);
  EmitResult result;
  const bool constrained = r.constraint != nullptr && r.params.scripted_tokens.empty();
  if (constrained && !tokenizer_.IsEog(token) && !r.constraint->Accept(tokenizer_.TokenToPiece(token, false))) {
    result.finish_reason = "error";
    result.error = InvalidArgumentError("token " + std::to_string(token) +
                                        " does not fit the request's structured output grammar");
    return result;
  }
  if (std::optional<std::string> finish = AppendToken(r, token, lp)) {
    result.finish_reason = *finish;
  } else if (constrained && r.constraint->Terminated()) {
    result.finish_reason = "stop";  // nothing may follow
  }
  return result;
}

bool OutputProcessor::CanContinueAfter(const Request& r, int32_t token) const {
  return r.params.logprobs < 0 && r.params.scripted_tokens.empty() &&
         (r.constraint == nullptr || tokenizer_.IsEog(token) ||
          r.constraint->CanAccept(tokenizer_.TokenToPiece(token, false)));
}

void OutputProcessor::Send(Request& r) {
  RequestOutput out = TakeOutput(r, "");
  out.index = r.choice_index;
  if (!out.new_tokens.empty() || !out.new_text.empty()) r.on_output(out);
}

void OutputProcessor::Finish(Request& r, const std::string& reason, const Status& error,
                             const std::string& stop_reason, std::optional<KvTransferParams> kv_transfer_params) {
  RequestOutput out = TakeOutput(r, reason);
  out.index = r.choice_index;
  out.kv_transfer_params = std::move(kv_transfer_params);
  if (!stop_reason.empty()) out.stop_reason = stop_reason;
  if (reason == "error") out.error = error.ok() ? InternalError("the request failed") : error;
  metrics_->OnFinished(r, reason);
  TANDEM_LOG(INFO) << "request " << r.id << " finished: reason=" << reason << " prompt_tokens=" << r.prompt_len
                   << " num_computed_tokens=" << (r.prompt_len - std::max(0, r.num_cached_tokens))
                   << " cached_tokens=" << std::max(0, r.num_cached_tokens)
                   << " completion_tokens=" << r.num_output_tokens();
  r.on_output(out);
}

}  // namespace tandem
