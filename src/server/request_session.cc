#include "server/request_session.h"

#include <algorithm>
#include <cstdio>

#include "common/logging.h"
#include "net/openai_error.h"
#include "net/sse.h"
#include "server/kv_transfer_params.h"
#include "server/openai_request.h"

namespace tandem::server {
namespace {

// A client string for one log line: at most 128 bytes, control characters as '?'.
std::string LogSafe(const std::string& text) {
  std::string out = text.substr(0, 128);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

}  // namespace

RequestSession::RequestSession(
    SessionOptions options, std::shared_ptr<net::HttpResponseWriter> writer,
    std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers)
    : options_(std::move(options)), writer_(std::move(writer)) {
  const int n = std::max(1, options_.params.n);
  for (int i = 0; i < n; ++i) {
    ResponseContext context = options_.response;
    context.index = i;
    formatters_.emplace_back(std::move(context),
                             static_cast<size_t>(i) < output_parsers.size()
                                 ? std::move(output_parsers[static_cast<size_t>(i)])
                                 : nullptr);
  }
  finish_reasons_.resize(formatters_.size());
  stop_reasons_.resize(formatters_.size());
}

void RequestSession::Begin() {
  if (!options_.stream) return;
  std::lock_guard<std::mutex> lock(mu_);
  StartStreamLocked();
}

bool RequestSession::StartStreamLocked() {
  if (!stream_started_) {
    stream_started_ = true;
    writer_->StartStream(200, {{"Content-Type", "text/event-stream; charset=utf-8"},
                               {"Cache-Control", "no-cache"},
                               {"X-Request-Id", options_.response.id}});
  }
  return !writer_->IsClosed();
}

void RequestSession::WriteEventLocked(const std::string& payload) {
  writer_->Write(net::SseEvent(payload));
}

void RequestSession::OnOutput(const RequestOutput& output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  if (first_output_s_ < 0 && !output.new_tokens.empty()) {
    first_output_s_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  if (output.index < 0 || output.index >= static_cast<int>(formatters_.size())) {
    TANDEM_LOG(ERROR) << "request " << options_.response.id << ": output for unknown choice "
                      << output.index;
    return;
  }
  if (output.finished) {
    ChoiceFinishedLocked(output);
    return;
  }
  ResponseFormatter& formatter = formatters_[static_cast<size_t>(output.index)];
  if (!options_.stream) {
    formatter.Append(output);
    return;
  }
  if (!StartStreamLocked()) return;  // the client is gone; the abort is on its way
  UsageCounts usage{output.prompt_tokens, output.completion_tokens, output.cached_tokens};
  for (const std::string& payload :
       formatter.StreamChunks(output, "null", options_.continuous_usage ? &usage : nullptr)) {
    WriteEventLocked(payload);
  }
}

void RequestSession::ChoiceFinishedLocked(const RequestOutput& output) {
  const size_t i = static_cast<size_t>(output.index);
  if (formatters_.size() == 1 || output.finish_reason == "error" ||
      (!options_.stream && output.finish_reason == "abort")) {
    // One choice, or an end that fails the whole response (the other choices stop).
    FinishLocked(output);
    if (formatters_.size() > 1 && abort_) abort_();
    return;
  }
  if (!finish_reasons_[i].empty()) return;
  finish_reasons_[i] = output.finish_reason;
  stop_reasons_[i] = StopReasonJson(output, options_.params);
  completion_tokens_ += output.completion_tokens;
  if (options_.stream) {
    if (!StartStreamLocked()) return;
    UsageCounts usage{output.prompt_tokens, output.completion_tokens, output.cached_tokens};
    for (const std::string& payload : formatters_[i].StreamChunks(
             output, stop_reasons_[i], options_.continuous_usage ? &usage : nullptr)) {
      WriteEventLocked(payload);
    }
  } else {
    formatters_[i].Append(output);
  }
  if (++num_finished_ < static_cast<int>(formatters_.size())) return;
  // Every choice is done: the last output stands for the request, its counts summed.
  RequestOutput last = output;
  last.completion_tokens = completion_tokens_;
  last.new_tokens.clear();
  last.new_text.clear();
  last.new_logprobs.clear();
  FinishLocked(last);
}

void RequestSession::FinishLocked(const RequestOutput& output) {
  finished_ = true;
  LogFinished(output);
  const UsageCounts usage{output.prompt_tokens, output.completion_tokens, output.cached_tokens};
  const bool failed = output.finish_reason == "error";
  if (formatters_.size() > 1 && !failed && !(output.finish_reason == "abort" && !options_.stream)) {
    // n > 1 with every choice done (ChoiceFinishedLocked sent or folded their ends).
    if (!options_.stream) {
      std::vector<std::string> responses;
      for (size_t i = 0; i < formatters_.size(); ++i) {
        responses.push_back(
            formatters_[i].FinalResponse(finish_reasons_[i], stop_reasons_[i], usage));
      }
      writer_->SendResponse(
          200, {{"Content-Type", "application/json"}, {"X-Request-Id", options_.response.id}},
          MergeChoices(responses));
      return;
    }
    if (!StartStreamLocked()) return;
    if (options_.include_usage) WriteEventLocked(formatters_[0].UsageChunk(usage));
    WriteEventLocked("[DONE]");
    writer_->End();
    return;
  }
  ResponseFormatter& formatter = formatters_[static_cast<size_t>(output.index)];
  if (!options_.stream) {
    if (failed || output.finish_reason == "abort") {
      Status error = failed ? output.error : UnavailableError("the request was aborted");
      if (error.ok()) error = InternalError("the engine failed the request");
      int status = HttpStatusFor(error);
      writer_->SendResponse(status, {}, net::OpenAiErrorJson(status, error.message()));
      return;
    }
    formatter.Append(output);
    writer_->SendResponse(
        200, {{"Content-Type", "application/json"}, {"X-Request-Id", options_.response.id}},
        formatter.FinalResponse(
            output.finish_reason, StopReasonJson(output, options_.params), usage,
            output.kv_transfer_params ? KvTransferParamsJson(*output.kv_transfer_params)
                                      : std::string()));
    return;
  }
  if (!StartStreamLocked()) return;
  if (failed) {
    // vLLM's in-stream error: an error event, then [DONE].
    Status error =
        output.error.ok() ? InternalError("the engine failed the request") : output.error;
    WriteEventLocked(net::OpenAiErrorJson(HttpStatusFor(error), error.message()));
  } else {
    for (const std::string& payload :
         formatter.StreamChunks(output, StopReasonJson(output, options_.params),
                                options_.continuous_usage ? &usage : nullptr)) {
      WriteEventLocked(payload);
    }
    if (options_.include_usage) WriteEventLocked(formatter.UsageChunk(usage));
  }
  WriteEventLocked("[DONE]");
  writer_->End();
}

void RequestSession::LogFinished(const RequestOutput& output) const {
  const double latency_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char timing[96];
  std::snprintf(timing, sizeof(timing), "latency_s=%.3f ttft_s=%.3f", latency_s, first_output_s_);
  TANDEM_LOG(INFO) << "finished request " << options_.response.id
                   << ": prompt_tokens=" << output.prompt_tokens
                   << " num_computed_tokens=" << (output.prompt_tokens - output.cached_tokens)
                   << " cached_tokens=" << output.cached_tokens
                   << " completion_tokens=" << output.completion_tokens
                   << " finish_reason=" << output.finish_reason << " " << timing
                   << (options_.user.empty() ? std::string() : " user=" + LogSafe(options_.user))
                   << (output.finish_reason == "error" ? " error=" + output.error.message()
                                                       : std::string());
}

Status SubmitGeneration(Engine& engine, std::vector<int32_t> prompt_tokens, SessionOptions options,
                        std::shared_ptr<net::HttpResponseWriter> writer,
                        std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers) {
  // A prefill-phase request runs under its own engine id: on a kv_both instance the
  // decode phase of the same request (same X-Request-Id) may arrive while it is kept.
  RequestKvTransfer kv = std::move(options.kv_transfer);
  const std::string id = options.response.id + (kv.do_remote_decode ? "-prefill" : "");
  auto session =
      std::make_shared<RequestSession>(std::move(options), writer, std::move(output_parsers));
  EngineRequest request;
  request.request_id = id;
  request.prompt_tokens = std::move(prompt_tokens);
  request.params = session->options().params;
  request.on_output = [session](const RequestOutput& output) { session->OnOutput(output); };
  if (session->options().params.n > 1)
    session->set_abort([&engine, id] { engine.AbortRequest(id); });
  if (!kv.problem.empty()) TANDEM_LOG(WARNING) << "request " << id << ": " << kv.problem << "; computing locally";
  request.kv_transfer = std::move(kv);  // the typed part travels on to the connectors
  TANDEM_RETURN_IF_ERROR(engine.AddRequest(std::move(request)));
  session->Begin();
  // Registered only now: an abort for an id the engine does not know yet would be lost.
  // If the client already left, the callback runs at once, here.
  writer->OnClose([&engine, id] {
    TANDEM_LOG(DEBUG) << "client disconnected; aborting " << id;
    engine.AbortRequest(id);
  });
  return Status();
}

}  // namespace tandem::server
