#include "ops/bench_runner.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>

#include "net/http_client.h"
#include "net/sse.h"

namespace tandem::ops {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The text a streamed chunk carries: completions' choices[0].text, chat's delta content
// and reasoning_content (both are generated tokens).
std::string ChunkText(const json& chunk) {
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) {
    return "";
  }
  const json& choice = chunk["choices"][0];
  std::string text;
  if (choice.contains("text") && choice["text"].is_string())
    text += choice["text"].get<std::string>();
  if (choice.contains("delta") && choice["delta"].is_object()) {
    const json& delta = choice["delta"];
    for (const char* field : {"reasoning_content", "content"}) {
      if (delta.contains(field) && delta[field].is_string())
        text += delta[field].get<std::string>();
    }
    if (delta.contains("tool_calls") && text.empty() && !delta["tool_calls"].empty()) {
      text = delta["tool_calls"].dump();  // a tool-call chunk is generated output too
    }
  }
  return text;
}

// Turns the bytes of one streamed response into a RequestResult.
class StreamRecorder {
 public:
  explicit StreamRecorder(Clock::time_point start) : start_(start) {}

  void OnHeaders(int status) { http_status_ = status; }

  void OnData(std::string_view bytes) {
    const Clock::time_point now = Clock::now();
    if (http_status_ != 200) {
      if (error_body_.size() < 2000) error_body_.append(bytes.substr(0, 2000));
      return;
    }
    std::vector<std::string> events;
    if (Status s = parser_.Feed(bytes, &events); !s.ok() && result_.error.empty()) {
      result_.error = s.ToString();
    }
    for (const std::string& event : events) {
      if (event == "[DONE]") continue;
      json chunk = json::parse(event, nullptr, /*allow_exceptions=*/false);
      if (!chunk.is_object()) {
        if (result_.error.empty()) result_.error = "malformed chunk: " + event.substr(0, 200);
        continue;
      }
      if (chunk.contains("error")) {
        if (result_.error.empty()) result_.error = "server error: " + chunk["error"].dump();
        continue;
      }
      const std::string text = ChunkText(chunk);
      if (!text.empty()) {
        if (!first_token_) {
          first_token_ = true;
          result_.ttft_s = SecondsBetween(start_, now);
        } else {
          result_.itl_s.push_back(SecondsBetween(last_token_, now));
        }
        last_token_ = now;
        ++text_chunks_;
        result_.generated_text += text;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        const json& usage = chunk["usage"];
        has_usage_ = true;
        result_.prompt_tokens = usage.value("prompt_tokens", 0);
        result_.output_tokens = usage.value("completion_tokens", 0);
        if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object()) {
          result_.cached_tokens = usage["prompt_tokens_details"].value("cached_tokens", 0);
        }
      }
    }
  }

  RequestResult Finish(const Status& status) {
    result_.latency_s = SecondsBetween(start_, Clock::now());
    if (!has_usage_) result_.output_tokens = text_chunks_;
    if (!status.ok()) {
      result_.error = status.ToString();
    } else if (http_status_ != 200) {
      result_.error = "HTTP " + std::to_string(http_status_) + ": " + error_body_;
    } else if (result_.error.empty() && !first_token_) {
      result_.error = "the stream carried no generated text";
    }
    result_.success = result_.error.empty();
    return std::move(result_);
  }

 private:
  Clock::time_point start_;
  Clock::time_point last_token_;
  int http_status_ = 0;
  bool first_token_ = false;
  bool has_usage_ = false;
  int text_chunks_ = 0;
  std::string error_body_;
  net::SseParser parser_;
  RequestResult result_;
};

// The dispatcher: the Run() thread starts requests, I/O-thread callbacks finish them.
class Runner {
 public:
  Runner(const BenchRunOptions& options, const std::vector<BenchSession>& sessions)
      : options_(options), sessions_(sessions), history_(sessions.size()) {
    for (const BenchSession& s : sessions) total_ += static_cast<int>(s.turns.size());
  }

  BenchRun Run(const std::vector<double>& arrival_s) {
    net::HttpClient client;
    start_ = Clock::now();
    for (size_t i = 0; i < sessions_.size(); ++i) {
      if (!sessions_[i].turns.empty()) ready_.push({arrival_s[i], i, 0});
    }
    std::unique_lock<std::mutex> lock(mu_);
    int reported = -1;
    while (done_ < total_) {
      const double now_s = SecondsBetween(start_, Clock::now());
      std::vector<Ready> to_start;
      while (!ready_.empty() && ready_.top().at_s <= now_s &&
             (options_.max_concurrency <= 0 || in_flight_ < options_.max_concurrency)) {
        to_start.push_back(ready_.top());
        ready_.pop();
        ++in_flight_;
        run_.max_in_flight = std::max(run_.max_in_flight, in_flight_);
      }
      if (!to_start.empty()) {
        std::vector<std::string> bodies;
        for (const Ready& r : to_start) {
          bodies.push_back(
              BuildRequestBody(options_, sessions_[r.session], r.turn, history_[r.session]));
        }
        lock.unlock();  // callbacks take the lock; never call Stream() holding it
        for (size_t k = 0; k < to_start.size(); ++k) {
          Send(client, to_start[k], std::move(bodies[k]));
        }
        lock.lock();
        continue;
      }
      if (done_ != reported && options_.on_progress) {
        reported = done_;
        lock.unlock();
        options_.on_progress(reported, total_);
        lock.lock();
        continue;
      }
      const bool can_start = options_.max_concurrency <= 0 || in_flight_ < options_.max_concurrency;
      if (can_start && !ready_.empty()) {
        const auto wake = start_ + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(ready_.top().at_s));
        cv_.wait_until(lock, wake);
      } else {
        cv_.wait(lock);
      }
    }
    run_.duration_s = SecondsBetween(start_, last_done_);
    lock.unlock();
    if (options_.on_progress && reported != total_) options_.on_progress(total_, total_);
    return std::move(run_);
  }

 private:
  struct Ready {
    double at_s;
    size_t session;
    size_t turn;
    bool operator>(const Ready& o) const { return at_s > o.at_s; }
  };

  void Send(net::HttpClient& client, const Ready& r, std::string body) {
    net::HttpClientRequest request;
    request.method = "POST";
    request.host = options_.target.host;
    request.port = options_.target.port;
    request.target = options_.target.endpoint;
    request.headers.Set("Content-Type", "application/json");
    if (!options_.target.api_key.empty()) {
      request.headers.Set("Authorization", "Bearer " + options_.target.api_key);
    }
    request.body = std::move(body);
    request.timeout = options_.request_timeout;
    auto recorder = std::make_shared<StreamRecorder>(Clock::now());
    net::HttpStreamCallbacks callbacks;
    callbacks.on_headers = [recorder](int status, const net::HttpHeaders&) {
      recorder->OnHeaders(status);
    };
    callbacks.on_data = [recorder](std::string_view bytes) { recorder->OnData(bytes); };
    callbacks.on_done = [this, recorder, r](Status status) {
      Finished(r, recorder->Finish(status));
    };
    client.Stream(std::move(request), std::move(callbacks));
  }

  void Finished(const Ready& r, RequestResult result) {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    last_done_ = now;
    --in_flight_;
    ++done_;
    const BenchSession& session = sessions_[r.session];
    result.group = session.group;
    const bool ok = result.success;
    if (ok && r.turn + 1 < session.turns.size()) {
      history_[r.session].push_back(session.turns[r.turn].user_text);
      history_[r.session].push_back(result.generated_text);
      ready_.push({SecondsBetween(start_, now) + options_.think_time_s, r.session, r.turn + 1});
    } else if (!ok) {
      // The rest of the conversation cannot be sent without this reply.
      for (size_t t = r.turn + 1; t < session.turns.size(); ++t) {
        RequestResult skipped;
        skipped.error = "not sent: an earlier turn of its session failed";
        run_.results.push_back(std::move(skipped));
        ++done_;
      }
    }
    run_.results.push_back(std::move(result));
    cv_.notify_one();
  }

  const BenchRunOptions& options_;
  const std::vector<BenchSession>& sessions_;
  int total_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point start_;
  Clock::time_point last_done_;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready_;
  std::vector<std::vector<std::string>> history_;  // [session][user, assistant, ...]
  int in_flight_ = 0;
  int done_ = 0;
  BenchRun run_;
};

}  // namespace

bool IsChatEndpoint(const std::string& endpoint) {
  const std::string suffix = "/chat/completions";
  return endpoint.size() >= suffix.size() &&
         endpoint.compare(endpoint.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string BuildRequestBody(const BenchRunOptions& options, const BenchSession& session,
                             size_t turn_index, const std::vector<std::string>& history) {
  const BenchTurn& turn = session.turns[turn_index];
  json body = {{"model", options.target.model},
               {"max_tokens", turn.output_len},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"temperature", options.temperature}};
  if (options.ignore_eos) body["ignore_eos"] = true;
  if (IsChatEndpoint(options.target.endpoint)) {
    json messages = json::array();
    if (!session.system_prompt.empty()) {
      messages.push_back({{"role", "system"}, {"content", session.system_prompt}});
    }
    for (size_t i = 0; i < history.size(); ++i) {
      messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", history[i]}});
    }
    messages.push_back({{"role", "user"}, {"content", turn.user_text}});
    body["messages"] = std::move(messages);
  } else {
    std::string prompt = session.system_prompt;
    for (const std::string& text : history) prompt += (prompt.empty() ? "" : "\n\n") + text;
    prompt += (prompt.empty() ? "" : "\n\n") + turn.user_text;
    body["prompt"] = std::move(prompt);
  }
  return body.dump();
}

BenchRun RunBenchmark(const BenchRunOptions& options, const std::vector<BenchSession>& sessions,
                      const std::vector<double>& arrival_s) {
  Runner runner(options, sessions);
  return runner.Run(arrival_s);
}

namespace {

net::HttpClientRequest JsonRequest(const BenchTarget& target, std::string method, std::string path,
                                   std::string body) {
  net::HttpClientRequest request;
  request.method = std::move(method);
  request.host = target.host;
  request.port = target.port;
  request.target = std::move(path);
  if (!body.empty()) request.headers.Set("Content-Type", "application/json");
  if (!target.api_key.empty()) request.headers.Set("Authorization", "Bearer " + target.api_key);
  request.body = std::move(body);
  request.timeout = std::chrono::seconds(30);
  return request;
}

StatusOr<json> FetchJson(net::HttpClientRequest request) {
  net::HttpClient client;
  const std::string what = request.method + " " + request.target;
  StatusOr<net::HttpResponse> response = client.Fetch(std::move(request));
  if (!response.ok()) return response.status().WithContext(what);
  if (response->status == 404) return UnimplementedError(what + ": not served here");
  if (response->status != 200) {
    return UnavailableError(what + " answered HTTP " + std::to_string(response->status) + ": " +
                            response->body.substr(0, 300));
  }
  json body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return UnavailableError(what + ": the answer is not JSON");
  return body;
}

}  // namespace

StatusOr<std::string> FirstServedModel(const BenchTarget& target) {
  StatusOr<json> models = FetchJson(JsonRequest(target, "GET", "/v1/models", ""));
  if (!models.ok()) return models.status();
  if (!models->contains("data") || !(*models)["data"].is_array() || (*models)["data"].empty() ||
      !(*models)["data"][0].contains("id") || !(*models)["data"][0]["id"].is_string()) {
    return UnavailableError("GET /v1/models lists no model");
  }
  return (*models)["data"][0]["id"].get<std::string>();
}

StatusOr<double> MeasureTokensPerWord(const BenchTarget& target) {
  constexpr int kSampleWords = 400;
  json request = {{"model", target.model},
                  {"prompt", " " + RandomWords(kSampleWords, /*seed=*/12345)},
                  {"add_special_tokens", false}};
  StatusOr<json> answer = FetchJson(JsonRequest(target, "POST", "/tokenize", request.dump()));
  if (!answer.ok()) return answer.status();
  int count = 0;
  if (answer->contains("count") && (*answer)["count"].is_number_integer()) {
    count = (*answer)["count"].get<int>();
  } else if (answer->contains("tokens") && (*answer)["tokens"].is_array()) {
    count = static_cast<int>((*answer)["tokens"].size());
  }
  if (count <= 0) return UnavailableError("POST /tokenize returned no tokens");
  return static_cast<double>(count) / kSampleWords;
}

std::string FormatProgress(int done, int total, double elapsed_s) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%6d/%d [%s] %7.1f s", done, total, bar.c_str(), elapsed_s);
  return buf;
}

}  // namespace tandem::ops
