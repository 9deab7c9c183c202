// Structured-output specs and the bounded cache of their compiled automata.
//
// A spec is what a request asks to constrain its output to (JSON schema, any JSON
// object, regex, a choice of strings, a GBNF grammar, or forced tool calls). Compiling
// is deterministic in the spec, so equal specs share one GrammarAutomaton (and its mask
// cache) while it is among the `capacity` most recently used.
//
// Thread safety: GrammarCache is thread-safe; the automata it returns are too.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/thinking_grammar.h"

namespace tandem::grammar {

struct StructuredOutputSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kToolCalls };
  Kind kind = Kind::kJsonObject;
  // kJsonSchema: the schema (JSON); kRegex: the pattern; kChoice: a JSON array of
  // strings; kGrammar: GBNF text; kToolCalls: {"tools": [...], "name": "f" or null}.
  std::string text;
  // A reasoning model's <think> block before the output (thinking_grammar.h).
  Thinking thinking = Thinking::kNone;
  // kJsonSchema / kJsonObject: whitespace and unnamed properties (the request's
  // structured_outputs.disable_any_whitespace / disable_additional_properties).
  JsonSchemaOptions json = {};
};

// Compiles a spec. InvalidArgument (message without the request field's name) for an
// invalid or unsupported schema, regex or grammar.
StatusOr<Grammar> CompileSpec(const StructuredOutputSpec& spec);

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 32) : capacity_(capacity) {}

  // The automaton for `spec`, compiled on a miss (errors are not cached).
  StatusOr<std::shared_ptr<GrammarAutomaton>> Get(const StructuredOutputSpec& spec);

  int64_t hits() const;
  int64_t misses() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<GrammarAutomaton>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;                                             // guarded by mu_; front = newest
  std::unordered_map<std::string, std::list<Entry>::iterator> map_;  // guarded by mu_
  int64_t hits_ = 0, misses_ = 0;                                    // guarded by mu_
};

}  // namespace tandem::grammar
