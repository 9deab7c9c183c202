// jinja::Template: a parsed Jinja-subset template and its renderer. chat_template.h builds
// on it; use this directly only for non-chat templates and tests.
//
// Scoping follows Jinja2: `for` bodies, macros and `with` open a scope (a `set` inside them
// is not visible outside; use namespace() to carry state out), `if` does not; macros see
// their arguments plus the template's top-level variables at call time. Undefined variables
// behave like Jinja2's default Undefined: falsy, print as "", iterate as empty, `is defined`
// false; taking an attribute or item of one is an error, as in Jinja2 (an attribute of none,
// or a missing key, yields undefined).
//
// Safety: rendering untrusted templates and inputs cannot crash, hang or overflow the stack;
// RenderLimits bounds output size, evaluation depth, macro recursion, loop iterations and
// total work, and exceeding any is a kResourceExhausted error. Template errors (bad types,
// unknown filters, raise_exception) are kInvalidArgument.
//
// Thread safety: a Template is immutable after Parse; Render may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"
#include "template/jinja_value.h"

namespace tandem::jinja {

struct RenderOptions {
  RenderLimits limits;
  // Clock for strftime_now (UTC when set, for reproducible output); default: local wall clock.
  std::optional<int64_t> now_unix_seconds;
};

class Template {
 public:
  // Parses with Hugging Face's settings (trim_blocks, lstrip_blocks, loop controls).
  static StatusOr<Template> Parse(std::string_view source);

  // Renders with the entries of `variables` (a dict Value; anything else means none) as
  // template variables, on top of the builtin globals (range, dict, namespace,
  // raise_exception, strftime_now), which a variable of the same name overrides.
  StatusOr<std::string> Render(const Value& variables, const RenderOptions& options = {}) const;

  const Program& program() const { return *program_; }

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace tandem::jinja
