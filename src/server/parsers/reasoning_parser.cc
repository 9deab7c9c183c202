#include "server/parsers/reasoning_parser.h"

#include "server/parsers/parser_text.h"

namespace tandem::parsers {

namespace {

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

}  // namespace

ReasoningParser::ReasoningParser(Style style, bool enable_thinking)
    : style_(style), state_(enable_thinking ? State::kStart : State::kContent) {}

ReasoningDelta ReasoningParser::Feed(std::string_view delta_text) {
  buffer_.append(delta_text);
  ReasoningDelta out;
  while (Step(out)) {
  }
  return out;
}

ReasoningDelta ReasoningParser::Finish() {
  ReasoningDelta out;
  bool reasoning =
      state_ == State::kReasoning || (state_ == State::kStart && style_ == Style::kOpenTagOptional);
  (reasoning ? out.reasoning : out.content) = std::move(buffer_);
  buffer_.clear();
  state_ = State::kContent;
  return out;
}

ExtractedReasoning ReasoningParser::Extract(std::string_view full_text) {
  ReasoningDelta all = Feed(full_text);
  ReasoningDelta tail = Finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  ExtractedReasoning result;
  if (!all.reasoning.empty()) result.reasoning = std::move(all.reasoning);
  if (!all.content.empty()) result.content = std::move(all.content);
  return result;
}

bool ReasoningParser::Step(ReasoningDelta& out) {
  switch (state_) {
    case State::kStart: {
      size_t begin = buffer_.find_first_not_of(" \t\r\n");
      if (begin == std::string::npos) return false;
      std::string_view rest = std::string_view(buffer_).substr(begin);
      if (rest.starts_with(kThinkStart)) {
        buffer_.erase(0, begin + kThinkStart.size());
        state_ = State::kReasoning;
        return true;
      }
      if (rest.size() < kThinkStart.size() && kThinkStart.starts_with(rest)) return false;
      state_ = style_ == Style::kOpenTagOptional ? State::kReasoning : State::kContent;
      return true;
    }
    case State::kReasoning: {
      TagSearch end = FindTag(buffer_, kThinkEnd);
      if (end.pos == std::string_view::npos) {
        out.reasoning += buffer_;
        buffer_.clear();
        return false;
      }
      out.reasoning.append(buffer_, 0, end.pos);
      if (!end.complete) {
        buffer_.erase(0, end.pos);
        return false;
      }
      buffer_.erase(0, end.pos + kThinkEnd.size());
      state_ = State::kContent;
      return true;
    }
    case State::kContent:
      out.content += buffer_;
      buffer_.clear();
      return false;
  }
  return false;
}

StatusOr<std::unique_ptr<ReasoningParser>> MakeReasoningParser(std::string_view name,
                                                               bool enable_thinking) {
  if (name == "glm45" || name == "qwen3") {
    return std::make_unique<ReasoningParser>(ReasoningParser::Style::kOpenTagRequired,
                                             enable_thinking);
  }
  if (name == "deepseek_r1") {
    return std::make_unique<ReasoningParser>(ReasoningParser::Style::kOpenTagOptional,
                                             enable_thinking);
  }
  return InvalidArgumentError("unknown reasoning parser \"" + std::string(name) +
                              "\"; supported: deepseek_r1, glm45, qwen3");
}

}  // namespace tandem::parsers
