#include "template/jinja_parser.h"

#include <initializer_list>

#include "template/jinja_lexer.h"

namespace tandem::jinja {
namespace {

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> set) {
  for (std::string_view x : set) {
    if (s == x) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  StatusOr<Program> Run() {
    Program program;
    std::string end;
    TANDEM_RETURN_IF_ERROR(ParseBody(&program.body, {}, &end));
    return program;
  }

 private:
  // ---- token helpers -------------------------------------------------------------------
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Cur().type == TokenType::kOp && Cur().text == op; }
  bool IsName(std::string_view name) const { return Cur().type == TokenType::kName && Cur().text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }
  Status Error(const std::string& message) const {
    return InvalidArgumentError("template line " + std::to_string(Cur().line) + ": " + message);
  }
  std::string Describe() const {
    switch (Cur().type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVarEnd: return "'}}'";
      case TokenType::kText: return "template text";
      default: return "'" + Cur().text + "'";
    }
  }
  Status ExpectOp(std::string_view op) {
    if (SkipOp(op)) return Status::Ok();
    return Error("expected '" + std::string(op) + "', got " + Describe());
  }
  Status ExpectBlockEnd() {
    if (Cur().type == TokenType::kBlockEnd) {
      Advance();
      return Status::Ok();
    }
    return Error("expected end of statement '%}', got " + Describe());
  }
  StatusOr<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Error("expected a name, got " + Describe());
    std::string name = Cur().text;
    Advance();
    return name;
  }

  // Bounds recursion of the recursive-descent functions themselves.
  class NestingGuard {
   public:
    explicit NestingGuard(int* nesting) : nesting_(nesting) { ++*nesting_; }
    ~NestingGuard() { --*nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    int* nesting_;
  };
  Status CheckNesting() const {
    if (nesting_ > kMaxAstDepth) return ResourceExhaustedError("template nested too deeply");
    return Status::Ok();
  }

  ExprPtr NewExpr(ExprKind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Cur().line;
    return e;
  }
  // Computes the node depth from its children; rejects trees too deep to walk safely.
  StatusOr<ExprPtr> Done(ExprPtr e) {
    int d = 0;
    for (const auto& a : e->args) {
      if (a) d = std::max(d, a->depth);
    }
    for (const auto& [k, v] : e->kwargs) d = std::max(d, v->depth);
    e->depth = d + 1;
    if (e->depth > kMaxAstDepth) return ResourceExhaustedError("template expression nested too deeply");
    return e;
  }

  // ---- statements ----------------------------------------------------------------------
  Status ParseBody(StmtList* out, std::initializer_list<std::string_view> end_names, std::string* found) {
    NestingGuard guard(&nesting_);
    TANDEM_RETURN_IF_ERROR(CheckNesting());
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (end_names.size() == 0) return Status::Ok();
        return Error("unexpected end of template, expected '" + std::string(*(end_names.end() - 1)) + "'");
      }
      if (t.type == TokenType::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = t.line;
        s->text = t.text;
        out->push_back(std::move(s));
        Advance();
      } else if (t.type == TokenType::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = t.line;
        Advance();
        TANDEM_ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
        if (Cur().type != TokenType::kVarEnd) return Error("expected '}}', got " + Describe());
        Advance();
        out->push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        Advance();
        if (Cur().type != TokenType::kName) return Error("expected a tag name, got " + Describe());
        std::string tag = Cur().text;
        if (IsOneOf(tag, end_names)) {
          Advance();
          *found = tag;
          return Status::Ok();
        }
        TANDEM_ASSIGN_OR_RETURN(auto stmt, ParseStatement());
        out->push_back(std::move(stmt));
      } else {
        return Error("unexpected " + Describe());
      }
    }
  }

  StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    std::string tag = Cur().text;
    Advance();
    std::string end;
    if (tag == "if") {
      s->kind = StmtKind::kIf;
      while (true) {
        TANDEM_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false));
        TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
        StmtList body;
        TANDEM_RETURN_IF_ERROR(ParseBody(&body, {"elif", "else", "endif"}, &end));
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end != "elif") break;
      }
      if (end == "else") {
        TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
        TANDEM_RETURN_IF_ERROR(ParseBody(&s->else_body, {"endif"}, &end));
      }
    } else if (tag == "for") {
      s->kind = StmtKind::kFor;
      TANDEM_RETURN_IF_ERROR(ParseTargets(&s->targets));
      if (!SkipName("in")) return Error("expected 'in' in for loop, got " + Describe());
      TANDEM_ASSIGN_OR_RETURN(s->expr, ParseTuple(false));
      if (SkipName("if")) {
        TANDEM_ASSIGN_OR_RETURN(s->condition, ParseExpression(true));
      }
      if (IsName("recursive")) return Error("recursive for loops are not supported");
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"else", "endfor"}, &end));
      --loop_depth_;
      if (end == "else") {
        TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
        TANDEM_RETURN_IF_ERROR(ParseBody(&s->else_body, {"endfor"}, &end));
      }
    } else if (tag == "set") {
      TANDEM_RETURN_IF_ERROR(ParseTargets(&s->targets));
      if (s->targets.size() == 1 && SkipOp(".")) {
        TANDEM_ASSIGN_OR_RETURN(s->attr, ExpectName());
      }
      if (SkipOp("=")) {
        s->kind = StmtKind::kSet;
        TANDEM_ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
      } else {
        s->kind = StmtKind::kSetBlock;
        if (s->targets.size() != 1 || !s->attr.empty()) return Error("block set needs one plain name");
        if (IsOp("|")) {
          TANDEM_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr));
        }
        TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
        TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endset"}, &end));
      }
    } else if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      TANDEM_ASSIGN_OR_RETURN(s->text, ExpectName());
      TANDEM_RETURN_IF_ERROR(ParseParams(&s->params));
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      int saved_loops = loop_depth_;
      loop_depth_ = 0;
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endmacro"}, &end));
      loop_depth_ = saved_loops;
      if (Cur().type == TokenType::kName) Advance();  // {% endmacro name %}
    } else if (tag == "call") {
      s->kind = StmtKind::kCallBlock;
      if (IsOp("(")) TANDEM_RETURN_IF_ERROR(ParseParams(&s->params));
      TANDEM_ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
      if (s->expr->kind != ExprKind::kCall) return Error("expected a macro call after 'call'");
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endcall"}, &end));
    } else if (tag == "filter") {
      s->kind = StmtKind::kFilterBlock;
      TANDEM_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr, /*leading_pipe=*/false));
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endfilter"}, &end));
    } else if (tag == "with") {
      s->kind = StmtKind::kWith;
      while (Cur().type != TokenType::kBlockEnd) {
        if (!s->targets.empty()) TANDEM_RETURN_IF_ERROR(ExpectOp(","));
        TANDEM_ASSIGN_OR_RETURN(std::string name, ExpectName());
        TANDEM_RETURN_IF_ERROR(ExpectOp("="));
        TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        s->targets.push_back(std::move(name));
        s->values.push_back(std::move(value));
      }
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endwith"}, &end));
    } else if (tag == "generation") {
      s->kind = StmtKind::kScope;
      TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
      TANDEM_RETURN_IF_ERROR(ParseBody(&s->body, {"endgeneration"}, &end));
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Error("'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    } else if (tag == "do") {
      s->kind = StmtKind::kDo;
      TANDEM_ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
    } else {
      --pos_;
      return Error("unknown or unsupported tag '" + tag + "'");
    }
    TANDEM_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  // `a`, `a, b`, `(a, b)`.
  Status ParseTargets(std::vector<std::string>* targets) {
    bool parens = SkipOp("(");
    do {
      TANDEM_ASSIGN_OR_RETURN(std::string name, ExpectName());
      targets->push_back(std::move(name));
    } while (SkipOp(","));
    if (parens) TANDEM_RETURN_IF_ERROR(ExpectOp(")"));
    return Status::Ok();
  }

  Status ParseParams(std::vector<MacroParam>* params) {
    TANDEM_RETURN_IF_ERROR(ExpectOp("("));
    while (!SkipOp(")")) {
      if (!params->empty()) TANDEM_RETURN_IF_ERROR(ExpectOp(","));
      if (SkipOp(")")) break;
      MacroParam p;
      TANDEM_ASSIGN_OR_RETURN(p.name, ExpectName());
      if (SkipOp("=")) {
        TANDEM_ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
      }
      params->push_back(std::move(p));
    }
    return Status::Ok();
  }

  // ---- expressions ---------------------------------------------------------------------
  // An expression, or a tuple `a, b` without parentheses.
  StatusOr<ExprPtr> ParseTuple(bool with_condexpr) {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
    if (!IsOp(",")) return first;
    ExprPtr tuple = NewExpr(ExprKind::kTuple);
    tuple->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == TokenType::kBlockEnd || Cur().type == TokenType::kVarEnd || IsName("if")) break;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr next, ParseExpression(with_condexpr));
      tuple->args.push_back(std::move(next));
    }
    return Done(std::move(tuple));
  }

  StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    NestingGuard guard(&nesting_);
    TANDEM_RETURN_IF_ERROR(CheckNesting());
    TANDEM_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (with_condexpr && IsName("if")) {
      ExprPtr cond = NewExpr(ExprKind::kCondExpr);
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        TANDEM_ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      cond->args.push_back(std::move(expr));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(otherwise));
      TANDEM_ASSIGN_OR_RETURN(expr, Done(std::move(cond)));
    }
    return expr;
  }

  StatusOr<ExprPtr> Binary(std::string op, ExprPtr left, ExprPtr right) {
    ExprPtr e = NewExpr(ExprKind::kBinary);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return Done(std::move(e));
  }

  StatusOr<ExprPtr> ParseOr() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (SkipName("or")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      TANDEM_ASSIGN_OR_RETURN(left, Binary("or", std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseAnd() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (SkipName("and")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      TANDEM_ASSIGN_OR_RETURN(left, Binary("and", std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      NestingGuard guard(&nesting_);
      TANDEM_RETURN_IF_ERROR(CheckNesting());
      ExprPtr e = NewExpr(ExprKind::kUnary);
      e->name = "not";
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      e->args.push_back(std::move(operand));
      return Done(std::move(e));
    }
    return ParseCompare();
  }

  StatusOr<ExprPtr> ParseCompare() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == TokenType::kOp && IsOneOf(Cur().text, {"==", "!=", "<", "<=", ">", ">="})) {
        op = Cur().text;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Peek().type == TokenType::kName && Peek().text == "in") {
        op = "notin";
        Advance();
        Advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = NewExpr(ExprKind::kCompare);
        cmp->args.push_back(std::move(first));
      }
      TANDEM_ASSIGN_OR_RETURN(ExprPtr next, ParseMath1());
      cmp->ops.push_back(std::move(op));
      cmp->args.push_back(std::move(next));
    }
    if (!cmp) return first;
    return Done(std::move(cmp));
  }

  StatusOr<ExprPtr> ParseMath1() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      TANDEM_ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseConcat() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (SkipOp("~")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      TANDEM_ASSIGN_OR_RETURN(left, Binary("~", std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseMath2() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      TANDEM_ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParsePow() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (SkipOp("**")) {
      TANDEM_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      TANDEM_ASSIGN_OR_RETURN(left, Binary("**", std::move(left), std::move(right)));
    }
    return left;
  }

  StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    NestingGuard guard(&nesting_);
    TANDEM_RETURN_IF_ERROR(CheckNesting());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = NewExpr(ExprKind::kUnary);
      node->name = Cur().text;
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->args.push_back(std::move(operand));
      TANDEM_ASSIGN_OR_RETURN(node, Done(std::move(node)));
    } else {
      TANDEM_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    TANDEM_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      TANDEM_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  StatusOr<ExprPtr> ParsePrimary();
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterChain(ExprPtr operand, bool leading_pipe = true);
  StatusOr<ExprPtr> ParseTest(ExprPtr node);
  Status ParseCallArgs(Expr* call);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Cur();
  ExprPtr e;
  switch (t.type) {
    case TokenType::kName: {
      e = NewExpr(ExprKind::kLiteral);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      Advance();
      return Done(std::move(e));
    }
    case TokenType::kString: {
      std::string s;
      while (Cur().type == TokenType::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Advance();
      }
      e = NewExpr(ExprKind::kLiteral);
      e->literal = Value::String(std::move(s));
      return Done(std::move(e));
    }
    case TokenType::kInt:
      e = NewExpr(ExprKind::kLiteral);
      e->literal = Value::Int(t.int_value);
      Advance();
      return Done(std::move(e));
    case TokenType::kFloat:
      e = NewExpr(ExprKind::kLiteral);
      e->literal = Value::Float(t.float_value);
      Advance();
      return Done(std::move(e));
    default: break;
  }
  if (SkipOp("(")) {
    if (SkipOp(")")) return Done(NewExpr(ExprKind::kTuple));
    TANDEM_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpression(true));
    if (!IsOp(",")) {
      TANDEM_RETURN_IF_ERROR(ExpectOp(")"));
      return inner;
    }
    e = NewExpr(ExprKind::kTuple);
    e->args.push_back(std::move(inner));
    while (SkipOp(",")) {
      if (IsOp(")")) break;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      e->args.push_back(std::move(item));
    }
    TANDEM_RETURN_IF_ERROR(ExpectOp(")"));
    return Done(std::move(e));
  }
  if (SkipOp("[")) {
    e = NewExpr(ExprKind::kList);
    while (!SkipOp("]")) {
      if (!e->args.empty()) {
        TANDEM_RETURN_IF_ERROR(ExpectOp(","));
        if (SkipOp("]")) break;
      }
      TANDEM_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      e->args.push_back(std::move(item));
    }
    return Done(std::move(e));
  }
  if (SkipOp("{")) {
    e = NewExpr(ExprKind::kDict);
    while (!SkipOp("}")) {
      if (!e->args.empty()) {
        TANDEM_RETURN_IF_ERROR(ExpectOp(","));
        if (SkipOp("}")) break;
      }
      TANDEM_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
      TANDEM_RETURN_IF_ERROR(ExpectOp(":"));
      TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      e->args.push_back(std::move(key));
      e->args.push_back(std::move(value));
    }
    return Done(std::move(e));
  }
  return Error("unexpected " + Describe());
}

StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      TANDEM_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      ExprPtr call = NewExpr(ExprKind::kCall);
      call->args.push_back(std::move(node));
      TANDEM_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      TANDEM_ASSIGN_OR_RETURN(node, Done(std::move(call)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  if (SkipOp(".")) {
    if (Cur().type == TokenType::kInt) {  // x.0 is x[0]
      ExprPtr e = NewExpr(ExprKind::kGetItem);
      ExprPtr index = NewExpr(ExprKind::kLiteral);
      index->literal = Value::Int(Cur().int_value);
      Advance();
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(index));
      return Done(std::move(e));
    }
    ExprPtr e = NewExpr(ExprKind::kGetAttr);
    TANDEM_ASSIGN_OR_RETURN(e->name, ExpectName());
    e->args.push_back(std::move(node));
    return Done(std::move(e));
  }
  TANDEM_RETURN_IF_ERROR(ExpectOp("["));
  ExprPtr parts[3];
  int part = 0;
  bool is_slice = false;
  while (!IsOp("]")) {
    if (SkipOp(":")) {
      is_slice = true;
      if (++part > 2) return Error("too many ':' in slice");
      continue;
    }
    if (parts[part]) return Error("expected ':' or ']' in subscript, got " + Describe());
    TANDEM_ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
  }
  Advance();
  ExprPtr e = NewExpr(is_slice ? ExprKind::kSlice : ExprKind::kGetItem);
  e->args.push_back(std::move(node));
  if (!is_slice) {
    if (!parts[0]) return Error("empty subscript");
    e->args.push_back(std::move(parts[0]));
  } else {
    for (auto& p : parts) e->args.push_back(std::move(p));
  }
  return Done(std::move(e));
}

Status Parser::ParseCallArgs(Expr* call) {
  TANDEM_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!SkipOp(")")) {
    if (!first) {
      TANDEM_RETURN_IF_ERROR(ExpectOp(","));
      if (SkipOp(")")) break;
    }
    first = false;
    if (IsOp("*") || IsOp("**")) return Error("*args / **kwargs in calls are not supported");
    if (Cur().type == TokenType::kName && Peek().type == TokenType::kOp && Peek().text == "=") {
      std::string name = Cur().text;
      Advance();
      Advance();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      call->kwargs.emplace_back(std::move(name), std::move(value));
    } else {
      if (!call->kwargs.empty()) return Error("positional argument follows keyword argument");
      TANDEM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      call->args.push_back(std::move(value));
    }
  }
  return Status::Ok();
}

StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      TANDEM_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node)));
    } else if (IsName("is")) {
      TANDEM_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      ExprPtr call = NewExpr(ExprKind::kCall);
      call->args.push_back(std::move(node));
      TANDEM_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      TANDEM_ASSIGN_OR_RETURN(node, Done(std::move(call)));
    } else {
      return node;
    }
  }
}

// `| f(args) | g ...` applied to `operand` (null inside {% filter %} / {% set x | f %}).
StatusOr<ExprPtr> Parser::ParseFilterChain(ExprPtr operand, bool leading_pipe) {
  bool first = true;
  while ((first && !leading_pipe) || SkipOp("|")) {
    first = false;
    ExprPtr f = NewExpr(ExprKind::kFilter);
    TANDEM_ASSIGN_OR_RETURN(f->name, ExpectName());
    while (SkipOp(".")) {
      TANDEM_ASSIGN_OR_RETURN(std::string part, ExpectName());
      f->name += "." + part;
    }
    f->args.push_back(std::move(operand));
    if (IsOp("(")) TANDEM_RETURN_IF_ERROR(ParseCallArgs(f.get()));
    TANDEM_ASSIGN_OR_RETURN(operand, Done(std::move(f)));
  }
  return operand;
}

StatusOr<ExprPtr> Parser::ParseTest(ExprPtr node) {
  ExprPtr t = NewExpr(ExprKind::kTest);
  Advance();  // is
  t->negated = SkipName("not");
  TANDEM_ASSIGN_OR_RETURN(t->name, ExpectName());
  t->args.push_back(std::move(node));
  if (IsOp("(")) {
    TANDEM_RETURN_IF_ERROR(ParseCallArgs(t.get()));
  } else if ((Cur().type == TokenType::kName || Cur().type == TokenType::kString ||
              Cur().type == TokenType::kInt || Cur().type == TokenType::kFloat || IsOp("[") ||
              IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Error("cannot chain multiple tests with 'is'");
    TANDEM_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    TANDEM_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    t->args.push_back(std::move(arg));
  }
  return Done(std::move(t));
}

}  // namespace

StatusOr<Program> ParseTemplate(std::string_view source) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  return Parser(std::move(tokens)).Run();
}

}  // namespace tandem::jinja
