// Parser of the Jinja-subset interpreter: tokens (jinja_lexer.h) -> Program (jinja_ast.h).
//
// Grammar follows Jinja2's precedence: conditional expr < or < and < not < comparison
// (== != < <= > >= in, not in) < + - < ~ < * / // % < ** < unary - + < postfix (.attr,
// [item], [a:b:c], call) and filters/tests (`|f(...)`, `is [not] t`). Statements: if/elif/
// else, for (tuple targets, `if` filter, else), set (names, tuples, ns.attr, block form),
// macro, call, filter, with, break, continue, do, generation.
// Unsupported tags (extends, block, include, import, ...) are errors.
//
// Thread safety: pure function.
#pragma once

#include <string_view>

#include "common/status.h"
#include "template/jinja_ast.h"

namespace tandem::jinja {

// Errors are kInvalidArgument with the template line; nesting deeper than kMaxAstDepth is
// kResourceExhausted.
StatusOr<Program> ParseTemplate(std::string_view source);

}  // namespace tandem::jinja
