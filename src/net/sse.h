// Server-Sent Events (text/event-stream) helpers.
//
// Server side: SseEvent("...") frames one event. Client side: SseParser turns a byte
// stream, cut anywhere, into complete event payloads, following the WHATWG event-stream
// rules: lines end with LF, CRLF or CR; "data:" lines of one event are joined with LF;
// one space after the colon is dropped; comments (":...") and other fields (event:,
// id:, retry:) are ignored; a blank line ends an event; an event with no data line is
// not reported.
//
// Thread safety: SseEvent is pure; an SseParser is used by one thread at a time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::net {

// "data: <data>\n\n". A multi-line `data` becomes one "data:" line per line, so the
// receiver gets it back intact.
std::string SseEvent(std::string_view data);

class SseParser {
 public:
  // `max_event_bytes` bounds the bytes buffered for one incomplete event.
  explicit SseParser(size_t max_event_bytes = 16u << 20) : max_event_bytes_(max_event_bytes) {}

  // Consumes `bytes` and appends the data of every event they complete to `events`.
  // Returns ResourceExhausted (and stays failed) once one event exceeds the bound.
  Status Feed(std::string_view bytes, std::vector<std::string>* events);

  // Bytes held for an event not yet complete.
  size_t buffered_bytes() const { return line_.size() + data_.size(); }

 private:
  void ProcessLine(std::vector<std::string>* events);

  size_t max_event_bytes_;
  std::string line_;   // the current line, without its terminator
  std::string data_;   // data lines of the current event, joined with '\n'
  bool has_data_ = false;
  bool last_was_cr_ = false;  // a CR ended the last line; a following LF belongs to it
  bool failed_ = false;
};

}  // namespace tandem::net
