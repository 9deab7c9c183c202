// DecodeOutputFilter: what the proxy changes in a decoder's response on its way to the
// client, and what it learns from it.
//
// The decoder's bytes go to the client unchanged, except:
//   * usage.prompt_tokens_details.cached_tokens becomes the prefiller's figure (the
//     decoder would count the transferred prompt as cached), rewritten in place;
//   * a choice that ends with stop_reason "recomputed" (the decoder gave the request
//     back) is not forwarded as an end: the filter stops there, the proxy re-routes the
//     rest of the request, and the chunk's text (if any) is forwarded without its
//     finish_reason;
//   * in a continuation segment (after such a re-route) a repeated chat role chunk is
//     dropped.
// Streams are cut into events at blank lines; an incomplete event is held until its end.
//
// Thread safety: one filter per decoder response, used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::proxy {

class DecodeOutputFilter {
 public:
  // `cached_tokens`: the prefiller's figure (nullopt: keep the decoder's).
  // `continuation`: the client already received an earlier segment of this response.
  DecodeOutputFilter(std::optional<int64_t> cached_tokens, bool continuation)
      : cached_tokens_(cached_tokens), continuation_(continuation) {}

  // Streaming: consumes SSE bytes (cut anywhere) and returns the bytes to forward now.
  // After recomputed() turns true, further input is ignored.
  std::string FeedStream(std::string_view bytes);
  // The end of the decoder's stream: the bytes of an unterminated last event, if any.
  std::string FinishStream();

  // Non-streaming: the decoder's whole JSON body; returns the client's body.
  std::string FilterBody(std::string body);

  // Non-streaming continuation: `body` (this segment's filtered body) with the earlier
  // segments' text put before its own and their tokens added to its usage.
  static std::string PrependSegments(std::string body, bool chat, std::string_view earlier_text,
                                     int64_t earlier_tokens);

  bool recomputed() const { return recomputed_; }
  bool saw_done() const { return saw_done_; }
  bool saw_error() const { return saw_error_; }
  // Text and tokens this segment generated so far (streams count chunks with text;
  // bodies read usage.completion_tokens).
  const std::string& text() const { return text_; }
  int64_t tokens() const { return tokens_; }
  // usage.prompt_tokens_details.cached_tokens as the decoder sent it (before the
  // rewrite), when its answer carried usage.
  std::optional<int64_t> reported_cached_tokens() const { return reported_cached_tokens_; }

 private:
  // Handles one complete raw event; appends what to forward to `out`.
  void HandleEvent(std::string raw, std::string* out);

  const std::optional<int64_t> cached_tokens_;
  const bool continuation_;
  std::string pending_;  // bytes of the event not yet complete
  std::string text_;
  int64_t tokens_ = 0;
  std::optional<int64_t> reported_cached_tokens_;
  bool recomputed_ = false;
  bool saw_done_ = false;
  bool saw_error_ = false;
};

}  // namespace tandem::proxy
