#include "proxy/decode_output_filter.h"

#include <vector>

#include "proxy/json_span.h"
#include "proxy/pd_bodies.h"

namespace tandem::proxy {
namespace {

constexpr std::string_view kRecomputed = "recomputed";

// The end of the first complete event in `s` (just past its blank line), or npos.
size_t EventEnd(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    // A line ends at i; the event ends if the next line is empty.
    size_t next = i + 1;
    if (s[i] == '\r' && next < s.size() && s[next] == '\n') ++next;
    if (next < s.size() && (s[next] == '\n' || s[next] == '\r')) {
      size_t end = next + 1;
      if (s[next] == '\r' && end < s.size() && s[end] == '\n') ++end;
      return end;
    }
  }
  return std::string_view::npos;
}

// Where the data of a one-line-data event lies: [begin, end) in the raw event.
struct DataLine {
  size_t begin = 0;
  size_t end = 0;
};

// The data of `raw` (data lines joined with '\n'), and the position of the single data
// line when there is exactly one.
std::string EventData(std::string_view raw, std::optional<DataLine>* single) {
  std::string data;
  int lines = 0;
  size_t pos = 0;
  DataLine line_pos;
  while (pos < raw.size()) {
    size_t eol = raw.find_first_of("\r\n", pos);
    if (eol == std::string_view::npos) eol = raw.size();
    std::string_view line = raw.substr(pos, eol - pos);
    if (line.substr(0, 5) == "data:") {
      size_t begin = pos + 5;
      if (begin < eol && raw[begin] == ' ') ++begin;
      if (lines++ > 0) data += '\n';
      data.append(raw.substr(begin, eol - begin));
      line_pos = {begin, eol};
    }
    pos = eol + 1;
    if (eol < raw.size() && raw[eol] == '\r' && pos < raw.size() && raw[pos] == '\n') ++pos;
  }
  if (lines == 1) *single = line_pos;
  return data;
}

const Json* FirstChoice(const Json& chunk) {
  auto it = chunk.find("choices");
  if (it == chunk.end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) return nullptr;
  return &(*it)[0];
}

// The text a choice carries: "text" (completions), delta.content or message.content (chat).
std::string ChoiceText(const Json& choice) {
  if (auto t = choice.find("text"); t != choice.end() && t->is_string())
    return t->get<std::string>();
  for (const char* key : {"delta", "message"}) {
    auto d = choice.find(key);
    if (d == choice.end() || !d->is_object()) continue;
    if (auto c = d->find("content"); c != d->end() && c->is_string()) return c->get<std::string>();
  }
  return {};
}

bool IsRecomputed(const Json& choice) {
  auto it = choice.find("stop_reason");
  return it != choice.end() && it->is_string() && it->get_ref<const std::string&>() == kRecomputed;
}

// A chat chunk that only announces the assistant role.
bool IsRoleChunk(const Json& choice) {
  auto d = choice.find("delta");
  if (d == choice.end() || !d->is_object() || !d->contains("role")) return false;
  auto c = d->find("content");
  return c == d->end() || c->is_null() ||
         (c->is_string() && c->get_ref<const std::string&>().empty());
}

}  // namespace

std::string DecodeOutputFilter::FeedStream(std::string_view bytes) {
  std::string out;
  if (recomputed_) return out;
  pending_.append(bytes);
  size_t consumed = 0;
  for (;;) {
    size_t end = EventEnd(std::string_view(pending_).substr(consumed));
    if (end == std::string_view::npos) break;
    HandleEvent(pending_.substr(consumed, end), &out);
    consumed += end;
    if (recomputed_) {
      pending_.clear();
      return out;
    }
  }
  pending_.erase(0, consumed);
  return out;
}

std::string DecodeOutputFilter::FinishStream() {
  std::string out;
  if (recomputed_ || pending_.empty()) return out;
  // An unterminated last event: treat it as complete (rewritten like any other).
  std::string raw = std::move(pending_);
  pending_.clear();
  HandleEvent(std::move(raw), &out);
  return out;
}

void DecodeOutputFilter::HandleEvent(std::string raw, std::string* out) {
  std::optional<DataLine> single;
  std::string data = EventData(raw, &single);
  if (data == "[DONE]") {
    saw_done_ = true;
    out->append(raw);
    return;
  }
  Json chunk = Json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {  // not JSON (a comment, a keep-alive): pass through
    out->append(raw);
    return;
  }
  if (chunk.contains("error")) saw_error_ = true;
  if (auto cached = JsonIntAt(data, {"usage", "prompt_tokens_details", "cached_tokens"})) {
    reported_cached_tokens_ = cached;
  }
  if (const Json* choice = FirstChoice(chunk)) {
    std::string piece = ChoiceText(*choice);
    if (!piece.empty()) {
      text_ += piece;
      ++tokens_;
    }
    if (IsRecomputed(*choice)) {
      recomputed_ = true;
      if (!piece.empty()) {  // keep the text, drop the end
        Json& c = chunk["choices"][0];
        c["finish_reason"] = nullptr;
        c["stop_reason"] = nullptr;
        chunk.erase("usage");
        out->append("data: " + DumpJson(chunk) + "\n\n");
      }
      return;
    }
    if (continuation_ && IsRoleChunk(*choice)) return;
  }
  if (cached_tokens_ && single && raw.find("cached_tokens") != std::string::npos) {
    std::string payload = raw.substr(single->begin, single->end - single->begin);
    if (ReplaceCachedTokens(&payload, *cached_tokens_)) {
      raw.replace(single->begin, single->end - single->begin, payload);
    }
  }
  out->append(raw);
}

std::string DecodeOutputFilter::FilterBody(std::string body) {
  Json response = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (response.is_object()) {
    if (const Json* choice = FirstChoice(response)) {
      text_ = ChoiceText(*choice);
      recomputed_ = IsRecomputed(*choice);
    }
    tokens_ = JsonIntAt(body, {"usage", "completion_tokens"}).value_or(0);
    reported_cached_tokens_ = JsonIntAt(body, {"usage", "prompt_tokens_details", "cached_tokens"});
  }
  if (cached_tokens_) ReplaceCachedTokens(&body, *cached_tokens_);
  return body;
}

std::string DecodeOutputFilter::PrependSegments(std::string body, bool chat,
                                                std::string_view earlier_text,
                                                int64_t earlier_tokens) {
  Json response = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!response.is_object()) return body;
  auto choices = response.find("choices");
  if (choices != response.end() && choices->is_array() && !choices->empty()) {
    Json& choice = (*choices)[0];
    if (chat && choice.contains("message") && choice["message"].is_object()) {
      Json& message = choice["message"];
      std::string own = message.value("content", Json("")).is_string()
                            ? message.value("content", std::string())
                            : std::string();
      message["content"] = std::string(earlier_text) + own;
    } else if (!chat) {
      choice["text"] = std::string(earlier_text) + choice.value("text", std::string());
    }
  }
  if (auto usage = response.find("usage"); usage != response.end() && usage->is_object()) {
    int64_t completion = usage->value("completion_tokens", int64_t{0}) + earlier_tokens;
    int64_t prompt = usage->value("prompt_tokens", int64_t{0}) - earlier_tokens;
    if (prompt < 0) prompt = 0;
    (*usage)["completion_tokens"] = completion;
    (*usage)["prompt_tokens"] = prompt;
    (*usage)["total_tokens"] = prompt + completion;
  }
  return DumpJson(response);
}

}  // namespace tandem::proxy
