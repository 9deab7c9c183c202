// Syntax tree of the Jinja-subset interpreter (built by jinja_parser, walked by
// jinja_interpreter). Plain data; a Program owns its whole tree through unique_ptrs.
// Node depth is bounded by the parser (kMaxAstDepth), so recursive walks are safe.
//
// Thread safety: immutable after parsing; may be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace tandem::jinja {

inline constexpr int kMaxAstDepth = 200;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // [args...]
  kTuple,     // (args...)
  kDict,      // {kwargs as key exprs: args[2i] -> args[2i+1]}
  kGetAttr,   // args[0].name
  kGetItem,   // args[0][args[1]]
  kSlice,     // args[0][args[1]:args[2]:args[3]] (null = omitted)
  kCall,      // args[0](args[1..], kwargs)
  kFilter,    // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %}
  kTest,      // args[0] is [not] name(args[1..], kwargs); negated
  kUnary,     // op args[0]: "-", "+", "not"
  kBinary,    // args[0] op args[1]: + - * / // % ** ~ and or
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >= in notin)
  kCondExpr,  // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  int depth = 1;         // 1 + max depth of children
  std::string name;      // name / attribute / filter / test / operator
  Value literal;         // kLiteral
  bool negated = false;  // kTest
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches: (cond, body)...; else_body
  kFor,          // for targets in expr [if cond]: body [else else_body]
  kSet,          // set targets = expr   |  set target.attr = expr (attr non-empty)
  kSetBlock,     // set target %}body{% endset (optional filter in expr: a kFilter chain)
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr body
  kFilterBlock,  // filter expr body
  kWith,         // with targets[i] = values[i]... body
  kBreak,
  kContinue,
  kDo,           // do expr (evaluate, discard)
  kScope,        // a transparent block (e.g. {% generation %}): body
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;                  // kText; macro name
  ExprPtr expr;                      // output / for iterable / set value / call / filter chain
  ExprPtr condition;                 // for ... if condition
  std::vector<std::string> targets;  // for / set / with names
  std::string attr;                  // set ns.attr
  std::vector<ExprPtr> values;       // with values
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if / elif
  StmtList body;
  StmtList else_body;
  std::vector<MacroParam> params;    // macro / call block
};

struct Program {
  StmtList body;
};

}  // namespace tandem::jinja
