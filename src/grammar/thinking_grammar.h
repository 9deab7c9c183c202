// Reasoning before the constrained output: wraps a grammar so that a reasoning model's
// `<think>...</think>` block may (or must) come first, the thinking itself free.
//
//   kOptional (glm45, qwen3 parsers):  root' ::= ws "<think>" T root | root
//   kRequired (deepseek_r1 parser):    root' ::= T root
// where T is any bytes up to and including the first "</think>" (a byte-level KMP
// automaton for the marker, so the thinking can hold any text but the marker itself
// and a token that spans "</think>" is handled exactly). Thread safety: pure functions.
#pragma once

#include "grammar/grammar.h"

namespace tandem::grammar {

enum class Thinking { kNone, kOptional, kRequired };

// The grammar with the thinking prefix added (unchanged for kNone).
Grammar WithThinking(Grammar g, Thinking thinking);

}  // namespace tandem::grammar
