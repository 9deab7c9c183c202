// Tokenizer of the Jinja-subset interpreter.
//
// Splits template source into text and tag tokens the way Jinja2 does with
// trim_blocks=True and lstrip_blocks=True (how Hugging Face renders chat templates):
//   - newlines are normalized to "\n" and one trailing newline is dropped;
//   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` after;
//   - trim_blocks: the first newline after `%}` or `#}` is removed (not after `}}`; `+%}` keeps it);
//   - lstrip_blocks: spaces/tabs between a line start and `{%` / `{#` are removed (`{%+` keeps them);
//   - comments vanish; `{% raw %}...{% endraw %}` becomes text.
// Whitespace control is resolved here, so the parser sees final text tokens.
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::jinja {

enum class TokenType {
  kText,        // literal template text (value in `text`)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword (in `text`)
  kString,      // string literal, escapes resolved (in `text`)
  kInt,         // integer literal (in `int_value`)
  kFloat,       // float literal (in `float_value`)
  kOp,          // operator or punctuation (in `text`): + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based source line
};

// Fails with kInvalidArgument on malformed source (unterminated tag, string or comment,
// unexpected character). The result always ends with one kEof token.
StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace tandem::jinja
