// GBNF (llama.cpp's grammar format; xgrammar reads the same dialect) -> Grammar, for the
// `grammar` / `guided_grammar` structured output.
//
// Accepted: rules `name ::= body` (names of letters, digits, '-' and '_'; one rule per
// definition, a body may span lines), `root` as the start rule, alternatives `|`,
// sequences, groups `( ... )`, string literals "..." with escapes \n \r \t \\ \" \'
// \[ \] \xHH \uHHHH \UHHHHHHHH, character classes [a-z], [^...] with the same escapes,
// `.` (any character), quantifiers `* + ?` and `{m}` `{m,}` `{m,n}`, `#` comments.
// Not accepted (InvalidArgument naming line and column): token references `<[id]>`,
// left recursion, undefined rules, syntax errors. Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace tandem::grammar {

StatusOr<Grammar> ParseGbnf(std::string_view text);

}  // namespace tandem::grammar
