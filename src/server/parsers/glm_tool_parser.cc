#include "server/parsers/glm_tool_parser.h"

#include <nlohmann/json.hpp>

#include "server/parsers/parser_text.h"

namespace tandem::parsers {

namespace {

constexpr std::string_view kArgKey = "<arg_key>";
constexpr std::string_view kArgKeyEnd = "</arg_key>";
constexpr std::string_view kArgValue = "<arg_value>";
constexpr std::string_view kArgValueEnd = "</arg_value>";
constexpr std::string_view kSpace = " \t\r\n";

// True when `text` is a proper prefix of `tag`: the next chunk may still complete it.
bool MayBecome(std::string_view text, std::string_view tag) {
  return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

}  // namespace

ToolStreamDelta GlmToolParser::Feed(std::string_view delta_text) {
  buffer_.append(delta_text);
  ToolStreamDelta out;
  while (Step(out)) {
  }
  return out;
}

ToolStreamDelta GlmToolParser::Finish() {
  ToolStreamDelta out;
  switch (state_) {
    case State::kContent:  // a held partial `<tool_call` is plain text after all
      EmitContent(buffer_, out);
      buffer_.clear();
      break;
    case State::kName:  // the name never completed: not a call
      AbandonCall(buffer_.size(), out);
      break;
    case State::kArgs:  // the name was streamed: keep the complete pairs, close it
      CloseCall(out);
      buffer_.clear();
      break;
  }
  state_ = State::kContent;
  return out;
}

bool GlmToolParser::Step(ToolStreamDelta& out) {
  switch (state_) {
    case State::kContent:
      if (!ConsumeContent(out)) return false;
      state_ = State::kName;
      return true;
    case State::kName:
      return StepName(out);
    case State::kArgs:
      return StepArgs(out);
  }
  return false;
}

bool GlmToolParser::StepName(ToolStreamDelta& out) {
  std::string_view text = buffer_;
  size_t name_begin = text.find_first_not_of(kSpace);
  if (name_begin == std::string_view::npos) return false;
  size_t name_end = text.find_first_of("\n<", name_begin);
  if (name_end == std::string_view::npos) return false;
  if (text[name_end] == '<') {
    std::string_view tag = text.substr(name_end);
    if (MayBecome(tag, kArgKey) || MayBecome(tag, kCallEnd)) return false;
    bool name_complete = tag.starts_with(kArgKey) || tag.starts_with(kCallEnd);
    if (!name_complete || name_end == name_begin) {
      // `<` inside the name or no name at all: not GLM call markup. The `<` may start
      // a new `<tool_call>`, so content scanning resumes there.
      AbandonCall(name_end, out);
      state_ = State::kContent;
      return true;
    }
  }
  BeginCall(std::string(StripWhitespace(text.substr(name_begin, name_end - name_begin))), out);
  call_name_ = *out.tool_calls.back().name;
  num_pairs_ = 0;
  buffer_.erase(0, text[name_end] == '\n' ? name_end + 1 : name_end);
  state_ = State::kArgs;
  return true;
}

bool GlmToolParser::StepArgs(ToolStreamDelta& out) {
  std::string_view text = buffer_;
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) {  // whitespace between tags carries nothing
    buffer_.clear();
    return false;
  }
  std::string_view rest = text.substr(begin);
  if (rest.starts_with(kCallEnd)) {
    CloseCall(out);
    buffer_.erase(0, begin + kCallEnd.size());
    state_ = State::kContent;
    return true;
  }
  if (rest.starts_with(kCallStart)) {  // a new call before this one closed
    CloseCall(out);
    buffer_.erase(0, begin + kCallStart.size());
    state_ = State::kName;
    return true;
  }
  if (rest.starts_with(kArgKey)) {
    size_t key_begin = kArgKey.size();
    size_t key_end = rest.find(kArgKeyEnd, key_begin);
    if (key_end == std::string_view::npos) return false;
    size_t after_key = key_end + kArgKeyEnd.size();
    size_t value_tag = rest.find_first_not_of(kSpace, after_key);
    if (value_tag == std::string_view::npos || MayBecome(rest.substr(value_tag), kArgValue)) {
      return false;
    }
    if (!rest.substr(value_tag).starts_with(kArgValue)) {
      buffer_.erase(0, begin + value_tag);  // a key without a value: drop the key
      return true;
    }
    size_t value_begin = value_tag + kArgValue.size();
    size_t value_end = rest.find(kArgValueEnd, value_begin);
    if (value_end == std::string_view::npos) return false;
    std::string_view key = StripWhitespace(rest.substr(key_begin, key_end - key_begin));
    std::string_view value = StripWhitespace(rest.substr(value_begin, value_end - value_begin));
    std::string piece = num_pairs_ == 0 ? "{" : ", ";
    piece += SerializeJson(Json(std::string(key)));
    piece += ": ";
    piece += schema_.TypedValueJson(call_name_, key, value);
    ++num_pairs_;
    EmitArguments(std::move(piece), out);
    buffer_.erase(0, begin + value_end + kArgValueEnd.size());
    return true;
  }
  if (MayBecome(rest, kCallEnd) || MayBecome(rest, kArgKey) || MayBecome(rest, kCallStart)) {
    return false;
  }
  // Stray text between pairs: skip it up to the next possible tag.
  size_t next_tag = rest.find('<', 1);
  buffer_.erase(0, next_tag == std::string_view::npos ? text.size() : begin + next_tag);
  return true;
}

void GlmToolParser::CloseCall(ToolStreamDelta& out) {
  EmitArguments(num_pairs_ == 0 ? "{}" : "}", out);
  num_pairs_ = 0;
  call_name_.clear();
}

}  // namespace tandem::parsers
