// Regex -> grammar expression, for the `regex` structured output and JSON-schema
// `pattern`.
//
// Supported (ECMAScript / Python `re` subset): literals (UTF-8), `.`, classes `[a-z]`,
// `[^...]`, escapes \d \D \w \W \s \S \n \r \t \f \v \0 \xHH \uHHHH and escaped
// punctuation, groups `(...)`, `(?:...)`, `(?<name>...)`, `(?P<name>...)`,
// alternation, quantifiers `* + ? {n} {n,} {n,m}` (lazy/possessive suffixes accepted:
// they change nothing for a full match). `^` at the start and `$` at the end are
// anchors. Refused with InvalidArgument naming the construct: backreferences,
// lookaround, \b \B, anchors elsewhere, and malformed syntax.
//
// The whole output must match (a full match). Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace tandem::grammar {

struct RegexExpr {
  Expr expr;
  bool anchored_start = false;  // the pattern began with ^
  bool anchored_end = false;    // the pattern ended with $
};

struct RegexOptions {
  // Inside a JSON string: `"` and `\` are produced escaped, control characters as \n,
  // \t, \uXXXX, and classes (and `.`) leave out `"`, `\` and control characters, so the
  // output is a valid JSON string body whose decoded value matches the pattern.
  bool json_string = false;
};

StatusOr<RegexExpr> CompileRegex(std::string_view pattern, const RegexOptions& options);

}  // namespace tandem::grammar
