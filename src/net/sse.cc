#include "net/sse.h"

namespace tandem::net {

std::string SseEvent(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 8);
  size_t start = 0;
  for (;;) {
    size_t end = data.find_first_of("\r\n", start);
    out += "data: ";
    out += data.substr(start, end == std::string_view::npos ? end : end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
  }
  out += '\n';
  return out;
}

Status SseParser::Feed(std::string_view bytes, std::vector<std::string>* events) {
  if (failed_) return ResourceExhaustedError("SSE event exceeds the size limit");
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\r' || c == '\n') {
      ProcessLine(events);
      continue;
    }
    line_ += c;
    if (buffered_bytes() > max_event_bytes_) {
      failed_ = true;
      line_.clear();
      data_.clear();
      return ResourceExhaustedError("SSE event exceeds " + std::to_string(max_event_bytes_) +
                                    " bytes");
    }
  }
  return Status::Ok();
}

void SseParser::ProcessLine(std::vector<std::string>* events) {
  std::string_view line(line_);
  if (line.empty()) {
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() != ':') {
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace tandem::net
