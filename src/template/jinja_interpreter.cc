#include "template/jinja_interpreter.h"

#include <map>

#include "template/jinja_parser.h"

namespace tandem::jinja {
namespace {

// Variables of one frame; lookups walk to the parents. Parents outlive children (frames live
// on the C++ stack of the interpreter calls that open them).
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* Find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_) {
      auto it = s->vars_.find(name);
      if (it != s->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  const Scope* parent_;
  std::map<std::string, Value, std::less<>> vars_;
};

class Interpreter {
 public:
  Interpreter(RenderContext* ctx, const Scope* root) : ctx_(*ctx), root_(root) {}

  Status Exec(const StmtList& body, Scope* scope, std::string* out) {
    for (const auto& stmt : body) {
      if (flow_ != Flow::kNormal) break;
      Status s = ExecStmt(*stmt, scope, out);
      if (!s.ok()) {
        if (annotated_) return s;
        annotated_ = true;
        return s.WithContext("template line " + std::to_string(stmt->line));
      }
    }
    return Status::Ok();
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Counts nesting of Exec/Eval to bound the C++ stack.
  class DepthGuard {
   public:
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    int* depth_;
  };
  Status Enter() {
    if (depth_ > ctx_.limits().max_eval_depth) return ResourceExhaustedError("template evaluation nested too deeply");
    return ctx_.Charge(1);
  }

  Status Append(std::string* out, std::string_view s) {
    if (out->size() + s.size() > ctx_.limits().max_output_bytes) {
      return ResourceExhaustedError("template output exceeds " + std::to_string(ctx_.limits().max_output_bytes) +
                                    " bytes");
    }
    TANDEM_RETURN_IF_ERROR(ctx_.Charge(static_cast<int64_t>(s.size())));
    out->append(s);
    return Status::Ok();
  }

  Status ExecStmt(const Stmt& s, Scope* scope, std::string* out);
  Status ExecFor(const Stmt& s, Scope* scope, std::string* out);
  Status Assign(const std::vector<std::string>& targets, const Value& v, Scope* scope);
  StatusOr<Value> Eval(const Expr& e, Scope* scope);
  // Like Eval, but an undefined result is an error, as Jinja2's Undefined raises on
  // attribute and item access ("'x' is undefined").
  StatusOr<Value> EvalDefined(const Expr& e, Scope* scope) {
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(e, scope));
    if (!v.is_undefined()) return v;
    std::string what = e.kind == ExprKind::kName || e.kind == ExprKind::kGetAttr ? e.name : "value";
    return InvalidArgumentError("'" + what + "' is undefined");
  }
  StatusOr<Value> EvalCall(const Expr& e, Scope* scope, const Value* caller);
  Status EvalArgs(const Expr& e, size_t first, Scope* scope, Args* args);
  StatusOr<Value> ApplyFilterChain(const Expr& f, Scope* scope, const Value& input);
  StatusOr<Value> Invoke(const Value& fn, const Args& args, const Value* caller, std::string_view name);
  StatusOr<Value> CallMacro(const Stmt& macro, const Args& args, const Value* caller);

  RenderContext& ctx_;
  const Scope* root_;
  Flow flow_ = Flow::kNormal;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t loop_iterations_ = 0;
  bool annotated_ = false;
};

Status Interpreter::ExecStmt(const Stmt& s, Scope* scope, std::string* out) {
  DepthGuard guard(&depth_);
  TANDEM_RETURN_IF_ERROR(Enter());
  switch (s.kind) {
    case StmtKind::kText: return Append(out, s.text);
    case StmtKind::kOutput: {
      TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      TANDEM_ASSIGN_OR_RETURN(std::string text, ToPyStr(v));
      return Append(out, text);
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        TANDEM_ASSIGN_OR_RETURN(Value c, Eval(*cond, scope));
        if (c.Truthy()) return Exec(body, scope, out);
      }
      return Exec(s.else_body, scope, out);
    case StmtKind::kFor: return ExecFor(s, scope, out);
    case StmtKind::kSet: {
      TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      if (s.attr.empty()) return Assign(s.targets, v, scope);
      const Value* ns = scope->Find(s.targets[0]);
      if (ns == nullptr || !ns->is_dict() || !ns->dict().is_namespace) {
        return InvalidArgumentError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
      }
      int64_t budget = 100000;
      if (Reaches(v, ns->identity(), /*namespace_paths_only=*/true, &budget)) {
        return InvalidArgumentError("namespace cannot contain itself");
      }
      TANDEM_RETURN_IF_ERROR(ctx_.Charge(100000 - budget));
      ns->dict().Set(s.attr, std::move(v));
      return Status::Ok();
    }
    case StmtKind::kSetBlock: {
      std::string captured;
      TANDEM_RETURN_IF_ERROR(Exec(s.body, scope, &captured));
      Value v = Value::String(std::move(captured));
      if (s.expr) {
        TANDEM_ASSIGN_OR_RETURN(v, ApplyFilterChain(*s.expr, scope, v));
      }
      scope->Set(s.targets[0], std::move(v));
      return Status::Ok();
    }
    case StmtKind::kMacro: {
      auto fn = std::make_shared<Callable>();
      fn->type = Callable::Type::kMacro;
      fn->name = s.text;
      fn->stmt = &s;
      scope->Set(s.text, Value::Function(std::move(fn)));
      return Status::Ok();
    }
    case StmtKind::kCallBlock: {
      auto alive = std::make_shared<const int>(0);
      auto fn = std::make_shared<Callable>();
      fn->type = Callable::Type::kCaller;
      fn->name = "caller";
      fn->stmt = &s;
      fn->alive = alive;
      fn->scope = scope;
      Value caller = Value::Function(std::move(fn));
      TANDEM_ASSIGN_OR_RETURN(Value v, EvalCall(*s.expr, scope, &caller));
      TANDEM_ASSIGN_OR_RETURN(std::string text, ToPyStr(v));
      return Append(out, text);
    }
    case StmtKind::kFilterBlock: {
      std::string captured;
      TANDEM_RETURN_IF_ERROR(Exec(s.body, scope, &captured));
      TANDEM_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*s.expr, scope, Value::String(std::move(captured))));
      TANDEM_ASSIGN_OR_RETURN(std::string text, ToPyStr(v));
      return Append(out, text);
    }
    case StmtKind::kWith: {
      Scope inner(scope);
      for (size_t i = 0; i < s.targets.size(); ++i) {
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*s.values[i], scope));
        inner.Set(s.targets[i], std::move(v));
      }
      return Exec(s.body, &inner, out);
    }
    case StmtKind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
    case StmtKind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
    case StmtKind::kDo: return Eval(*s.expr, scope).status();
    case StmtKind::kScope: return Exec(s.body, scope, out);
  }
  return Status::Ok();
}

Status Interpreter::Assign(const std::vector<std::string>& targets, const Value& v, Scope* scope) {
  if (targets.size() == 1) {
    scope->Set(targets[0], v);
    return Status::Ok();
  }
  if (!v.is_list() || v.list().items.size() != targets.size()) {
    return InvalidArgumentError("cannot unpack " + std::string(v.TypeName()) + " into " +
                                std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope->Set(targets[i], v.list().items[i]);
  return Status::Ok();
}

Status Interpreter::ExecFor(const Stmt& s, Scope* scope, std::string* out) {
  TANDEM_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, scope));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx_, iterable));
  if (s.condition) {  // `for x in xs if cond`: filter first, so loop.length counts survivors
    std::vector<Value> kept;
    for (Value& item : items) {
      Scope probe(scope);
      TANDEM_RETURN_IF_ERROR(Assign(s.targets, item, &probe));
      TANDEM_ASSIGN_OR_RETURN(Value keep, Eval(*s.condition, &probe));
      if (keep.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Scope inner(scope);
    return Exec(s.else_body, &inner, out);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (++loop_iterations_ > ctx_.limits().max_loop_iterations) {
      return ResourceExhaustedError("template loops exceeded " + std::to_string(ctx_.limits().max_loop_iterations) +
                                    " iterations");
    }
    Scope iteration(scope);
    TANDEM_RETURN_IF_ERROR(Assign(s.targets, items[static_cast<size_t>(i)], &iteration));
    Value loop = Value::NewDict();
    DictData& d = loop.dict();
    d.Set("index", Value::Int(i + 1));
    d.Set("index0", Value::Int(i));
    d.Set("revindex", Value::Int(n - i));
    d.Set("revindex0", Value::Int(n - i - 1));
    d.Set("first", Value::Bool(i == 0));
    d.Set("last", Value::Bool(i == n - 1));
    d.Set("length", Value::Int(n));
    d.Set("depth", Value::Int(1));
    d.Set("depth0", Value::Int(0));
    if (i > 0) d.Set("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) d.Set("nextitem", items[static_cast<size_t>(i + 1)]);
    iteration.Set("loop", std::move(loop));
    TANDEM_RETURN_IF_ERROR(Exec(s.body, &iteration, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return Status::Ok();
}

StatusOr<Value> Interpreter::Eval(const Expr& e, Scope* scope) {
  DepthGuard guard(&depth_);
  TANDEM_RETURN_IF_ERROR(Enter());
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: {
      const Value* v = scope->Find(e.name);
      return v != nullptr ? *v : Value();
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& a : e.args) {
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::NewDict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        TANDEM_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], scope));
        if (!k.is_string()) return InvalidArgumentError("dict literal keys must be strings");
        TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], scope));
        d.dict().Set(k.str(), std::move(v));
      }
      return d;
    }
    case ExprKind::kGetAttr: {
      TANDEM_ASSIGN_OR_RETURN(Value obj, EvalDefined(*e.args[0], scope));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      TANDEM_ASSIGN_OR_RETURN(Value obj, EvalDefined(*e.args[0], scope));
      TANDEM_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      TANDEM_ASSIGN_OR_RETURN(Value obj, EvalDefined(*e.args[0], scope));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[static_cast<size_t>(i) + 1]) {
          TANDEM_ASSIGN_OR_RETURN(bounds[i], Eval(*e.args[static_cast<size_t>(i) + 1], scope));
        }
      }
      auto ptr = [&](int i) { return e.args[static_cast<size_t>(i) + 1] ? &bounds[i] : nullptr; };
      return Slice(ctx_, obj, ptr(0), ptr(1), ptr(2));
    }
    case ExprKind::kCall: return EvalCall(e, scope, nullptr);
    case ExprKind::kFilter: {
      TANDEM_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0], scope));
      Args args;
      TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
      return CallFilter(ctx_, e.name, input, args);
    }
    case ExprKind::kTest: {
      TANDEM_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0], scope));
      Args args;
      TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
      TANDEM_ASSIGN_OR_RETURN(bool result, CallTest(ctx_, e.name, input, args));
      return Value::Bool(result != e.negated);
    }
    case ExprKind::kUnary: {
      TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      if (e.name == "not") return Value::Bool(!v.Truthy());
      if (e.name == "-") return Negate(v);
      if (!v.is_number()) return InvalidArgumentError("bad operand type for unary +");
      return v.is_bool() ? Value::Int(v.AsInt()) : v;
    }
    case ExprKind::kBinary: {
      TANDEM_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], scope));
      if (e.name == "and") return left.Truthy() ? Eval(*e.args[1], scope) : left;
      if (e.name == "or") return left.Truthy() ? left : Eval(*e.args[1], scope);
      TANDEM_ASSIGN_OR_RETURN(Value right, Eval(*e.args[1], scope));
      return BinaryOp(ctx_, e.name, left, right);
    }
    case ExprKind::kCompare: {
      TANDEM_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], scope));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        TANDEM_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], scope));
        const std::string& op = e.ops[i];
        bool r;
        if (op == "==" || op == "!=") {
          TANDEM_ASSIGN_OR_RETURN(r, ValuesEqual(left, right));
          if (op == "!=") r = !r;
        } else if (op == "<" || op == ">=") {
          TANDEM_ASSIGN_OR_RETURN(r, ValueLess(left, right));
          if (op == ">=") r = !r;
        } else if (op == ">" || op == "<=") {
          TANDEM_ASSIGN_OR_RETURN(r, ValueLess(right, left));
          if (op == "<=") r = !r;
        } else {
          TANDEM_ASSIGN_OR_RETURN(r, Contains(right, left));
          if (op == "notin") r = !r;
        }
        if (!r) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case ExprKind::kCondExpr: {
      TANDEM_ASSIGN_OR_RETURN(Value cond, Eval(*e.args[1], scope));
      if (cond.Truthy()) return Eval(*e.args[0], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value();
    }
  }
  return Value();
}

Status Interpreter::EvalArgs(const Expr& e, size_t first, Scope* scope, Args* args) {
  for (size_t i = first; i < e.args.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], scope));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    TANDEM_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args->kwargs.emplace_back(name, std::move(v));
  }
  return Status::Ok();
}

StatusOr<Value> Interpreter::ApplyFilterChain(const Expr& f, Scope* scope, const Value& input) {
  Value base = input;
  if (f.args[0]) {
    TANDEM_ASSIGN_OR_RETURN(base, ApplyFilterChain(*f.args[0], scope, input));
  }
  Args args;
  TANDEM_RETURN_IF_ERROR(EvalArgs(f, 1, scope, &args));
  return CallFilter(ctx_, f.name, base, args);
}

StatusOr<Value> Interpreter::EvalCall(const Expr& e, Scope* scope, const Value* caller) {
  const Expr& callee = *e.args[0];
  Value fn;
  std::string name = callee.kind == ExprKind::kName ? callee.name : "object";
  if (callee.kind == ExprKind::kGetAttr) {
    TANDEM_ASSIGN_OR_RETURN(Value obj, EvalDefined(*callee.args[0], scope));
    Args args;
    TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
    bool handled = false;
    TANDEM_ASSIGN_OR_RETURN(Value result, CallMethod(ctx_, obj, callee.name, args, &handled));
    if (handled) return result;
    return Invoke(GetAttr(obj, callee.name), args, caller, callee.name);
  }
  TANDEM_ASSIGN_OR_RETURN(fn, Eval(callee, scope));
  Args args;
  TANDEM_RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  return Invoke(fn, args, caller, name);
}

StatusOr<Value> Interpreter::Invoke(const Value& fn, const Args& args, const Value* caller, std::string_view name) {
  if (!fn.is_callable()) {
    if (fn.is_undefined()) return InvalidArgumentError("'" + std::string(name) + "' is undefined");
    return InvalidArgumentError("'" + std::string(fn.TypeName()) + "' object is not callable");
  }
  const Callable& c = fn.callable();
  switch (c.type) {
    case Callable::Type::kBuiltin: {
      StatusOr<Value> result = CallGlobal(ctx_, c.name, args);
      if (c.name == "raise_exception") annotated_ = true;  // keep the template's own message
      return result;
    }
    case Callable::Type::kMacro: return CallMacro(*c.stmt, args, caller);
    case Callable::Type::kCaller: {
      if (c.alive.expired()) return InvalidArgumentError("'caller' used after its call block ended");
      if (++call_depth_ > ctx_.limits().max_call_depth) {
        --call_depth_;
        return ResourceExhaustedError("macro calls nested too deeply");
      }
      Scope inner(static_cast<const Scope*>(c.scope));
      for (size_t i = 0; i < c.stmt->params.size(); ++i) {
        const Value* v = args.Get(i, c.stmt->params[i].name);
        inner.Set(c.stmt->params[i].name, v != nullptr ? *v : Value());
      }
      std::string out;
      Status s = Exec(c.stmt->body, &inner, &out);
      --call_depth_;
      TANDEM_RETURN_IF_ERROR(s);
      return Value::String(std::move(out));
    }
  }
  return Value();
}

StatusOr<Value> Interpreter::CallMacro(const Stmt& macro, const Args& args, const Value* caller) {
  if (++call_depth_ > ctx_.limits().max_call_depth) {
    --call_depth_;
    return ResourceExhaustedError("macro calls nested too deeply (recursion?)");
  }
  struct Release {
    int* depth;
    ~Release() { --*depth; }
  } release{&call_depth_};
  Scope inner(root_);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < macro.params.size()) {
      inner.Set(macro.params[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Value kwargs = Value::NewDict();
  for (const auto& [k, v] : args.kwargs) {
    bool is_param = false;
    for (const MacroParam& p : macro.params) is_param = is_param || p.name == k;
    if (is_param) {
      inner.Set(k, v);
    } else {
      kwargs.dict().Set(k, v);
    }
  }
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const MacroParam& p = macro.params[i];
    bool bound = i < args.positional.size();
    for (const auto& [k, v] : args.kwargs) bound = bound || k == p.name;
    if (bound) continue;
    Value v;
    if (p.default_value) {
      TANDEM_ASSIGN_OR_RETURN(v, Eval(*p.default_value, &inner));
    }
    inner.Set(p.name, std::move(v));
  }
  inner.Set("varargs", Value::List(std::move(varargs), true));
  inner.Set("kwargs", std::move(kwargs));
  if (caller != nullptr) inner.Set("caller", *caller);
  std::string out;
  TANDEM_RETURN_IF_ERROR(Exec(macro.body, &inner, &out));
  return Value::String(std::move(out));
}

}  // namespace

StatusOr<Template> Template::Parse(std::string_view source) {
  TANDEM_ASSIGN_OR_RETURN(Program program, ParseTemplate(source));
  return Template(std::make_shared<const Program>(std::move(program)));
}

StatusOr<std::string> Template::Render(const Value& variables, const RenderOptions& options) const {
  RenderContext ctx(options.limits, options.now_unix_seconds);
  Scope builtins(nullptr);
  for (const std::string& name : GlobalFunctionNames()) {
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kBuiltin;
    fn->name = name;
    builtins.Set(name, Value::Function(std::move(fn)));
  }
  Scope root(&builtins);
  if (variables.is_dict()) {
    for (const auto& [k, v] : variables.dict().entries()) root.Set(k, v);
  }
  Interpreter interpreter(&ctx, &root);
  std::string out;
  TANDEM_RETURN_IF_ERROR(interpreter.Exec(program_->body, &root, &out));
  return out;
}

}  // namespace tandem::jinja
