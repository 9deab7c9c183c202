#include "server/parsers/tool_call.h"

#include <nlohmann/json.hpp>
#include <random>

#include "common/logging.h"

namespace tandem::parsers {

using nlohmann::json;

void ToolCallAccumulator::Add(const ToolStreamDelta& delta) {
  content_ += delta.content;
  for (const ToolCallDelta& piece : delta.tool_calls) {
    if (piece.index == static_cast<int>(calls_.size())) {
      TANDEM_CHECK(piece.id.has_value() && piece.name.has_value())
          << "first piece of tool call " << piece.index << " lacks id/name";
      calls_.push_back(ToolCall{*piece.id, *piece.name, ""});
    }
    TANDEM_CHECK(piece.index >= 0 && piece.index < static_cast<int>(calls_.size()))
        << "tool call piece for unknown index " << piece.index;
    calls_[piece.index].arguments += piece.arguments;
  }
}

ExtractedToolCalls ToolCallAccumulator::Result() const {
  ExtractedToolCalls result;
  if (!content_.empty()) result.content = content_;
  result.tool_calls = calls_;
  result.tools_called = !calls_.empty();
  return result;
}

std::string NewToolCallId() {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // One generator per thread: ids need to be unique, not cryptographic.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string ToolCallToJson(const ToolCall& call) {
  json j = {{"id", call.id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToolCallDeltaToJson(const ToolCallDelta& delta) {
  json j = {{"index", delta.index}};
  json function = json::object();
  if (delta.id) {
    j["id"] = *delta.id;
    j["type"] = "function";
  }
  if (delta.name) function["name"] = *delta.name;
  function["arguments"] = delta.arguments;
  j["function"] = std::move(function);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tandem::parsers
