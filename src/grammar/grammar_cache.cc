#include "grammar/grammar_cache.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_compiler.h"
#include "grammar/tool_call_grammar.h"

namespace tandem::grammar {

namespace {

StatusOr<Grammar> CompileBody(const StructuredOutputSpec& spec) {
  using Kind = StructuredOutputSpec::Kind;
  switch (spec.kind) {
    case Kind::kJsonSchema:
      return CompileJsonSchema(spec.text, spec.json);
    case Kind::kJsonObject:
      return JsonObjectGrammar(spec.json);
    case Kind::kRegex: {
      TANDEM_ASSIGN_OR_RETURN(RegexExpr re, CompileRegex(spec.text, RegexOptions{}));
      GrammarBuilder b;
      b.Define(b.Declare("root"), std::move(re.expr));
      return std::move(b).Build("root");
    }
    case Kind::kChoice: {
      auto j = nlohmann::json::parse(spec.text, nullptr, /*allow_exceptions=*/false);
      if (!j.is_array() || j.empty()) return InvalidArgumentError("choice must be a non-empty list of strings");
      std::vector<Expr> alts;
      for (const auto& c : j) {
        if (!c.is_string()) return InvalidArgumentError("choice must be a non-empty list of strings");
        alts.push_back(Expr::Lit(c.get<std::string>()));
      }
      GrammarBuilder b;
      b.Define(b.Declare("root"), Expr::Alt(std::move(alts)));
      return std::move(b).Build("root");
    }
    case Kind::kGrammar:
      return ParseGbnf(spec.text);
    case Kind::kToolCalls:
      return CompileToolCallGrammar(spec.text);
  }
  return InternalError("unknown structured output kind");
}

}  // namespace

StatusOr<Grammar> CompileSpec(const StructuredOutputSpec& spec) {
  TANDEM_ASSIGN_OR_RETURN(Grammar g, CompileBody(spec));
  return WithThinking(std::move(g), spec.thinking);
}

StatusOr<std::shared_ptr<GrammarAutomaton>> GrammarCache::Get(const StructuredOutputSpec& spec) {
  std::string key = std::to_string(static_cast<int>(spec.kind)) + "," +
                    std::to_string(static_cast<int>(spec.thinking)) + "," +
                    std::to_string(static_cast<int>(spec.json.any_whitespace)) + "," +
                    std::to_string(static_cast<int>(spec.json.unnamed_properties)) + ":" + spec.text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    ++misses_;
  }
  // Compiled outside the lock: a slow schema does not hold up other requests.
  TANDEM_ASSIGN_OR_RETURN(Grammar g, CompileSpec(spec));
  auto automaton = std::make_shared<GrammarAutomaton>(std::move(g));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second->second;  // compiled meanwhile by another request
  lru_.emplace_front(key, automaton);
  map_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return automaton;
}

int64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace tandem::grammar
