// Language tests of the Jinja-subset interpreter: single-feature templates checked against
// Python jinja2 (tests/data/jinja_expression_golden.json, from tools/make_template_golden.py),
// error behaviour, and the safety limits against hostile templates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "template/jinja_interpreter.h"
#include "template/jinja_value.h"
#include "model/test_paths.h"

namespace tandem::jinja {
namespace {

StatusOr<std::string> Render(std::string_view source, const Value& vars = Value(),
                             const RenderOptions& options = {}) {
  TANDEM_ASSIGN_OR_RETURN(Template t, Template::Parse(source));
  return t.Render(vars, options);
}

std::string RenderOrError(std::string_view source) {
  StatusOr<std::string> r = Render(source);
  return r.ok() ? *r : "ERROR " + r.status().ToString();
}

TEST(JinjaGolden, ExpressionCasesMatchJinja2) {
  std::string text = ReadFileToString(TestDataPath("jinja_expression_golden.json"));
  ASSERT_FALSE(text.empty()) << "missing " << TestDataPath("jinja_expression_golden.json");
  StatusOr<Value> doc = ParseJson(text);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  Value vars = *doc->dict().Find("vars");
  RenderOptions options;
  options.now_unix_seconds = doc->dict().Find("now_unix_seconds")->int_value();
  int passed = 0, total = 0;
  for (const Value& c : doc->dict().Find("cases")->list().items) {
    ++total;
    const std::string& source = c.dict().Find("template")->str();
    StatusOr<std::string> got = Render(source, vars, options);
    if (const Value* expected = c.dict().Find("expected"); expected != nullptr) {
      if (!got.ok()) {
        ADD_FAILURE() << "template: " << source << "\nerror: " << got.status().ToString();
      } else if (*got != expected->str()) {
        ADD_FAILURE() << "template: " << source << "\nexpected: [" << expected->str()
                      << "]\n     got: [" << *got << "]";
      } else {
        ++passed;
      }
    } else if (got.ok()) {
      ADD_FAILURE() << "template: " << source << "\nexpected an error, got: [" << *got << "]";
    } else {
      ++passed;
    }
  }
  std::printf("jinja expression golden: %d/%d cases match jinja2\n", passed, total);
  EXPECT_EQ(passed, total);
}

TEST(JinjaErrors, RaiseExceptionKeepsMessage) {
  StatusOr<std::string> r = Render("a{{ raise_exception('Roles must alternate') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "Roles must alternate");
}

TEST(JinjaErrors, SyntaxAndRuntimeErrorsAreStatuses) {
  EXPECT_EQ(Render("{% if x %}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ x ").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{# open").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ 'open }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% include 'x' %}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% break %}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ x | nosuchfilter }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ x is nosuchtest }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ 1 // 0 }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ 1 < 'a' }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ missing.attr }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ missing() }}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{{ 9223372036854775807 + 1 }}").status().code(), StatusCode::kOutOfRange);
  StatusOr<std::string> r = Render("line1\n{{ 'a' + 1 }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
}

TEST(JinjaTemplate, GenerationBlockIsTransparentAndListsAppend) {
  EXPECT_EQ(RenderOrError("{% generation %}gen{% endgeneration %}"), "gen");
  EXPECT_EQ(RenderOrError("{% set l = [] %}{% do l.append(1) %}{{ l.append(2) }}{{ l }}"),
            "None[1, 2]");
  EXPECT_EQ(RenderOrError("{{ range is defined }} {{ strftime_now is defined }}"), "True True");
}

// ---- safety: hostile templates fail cleanly instead of crashing or hanging ------------

void ExpectExhausted(std::string_view source, const RenderOptions& options = {}) {
  StatusOr<std::string> r = Render(source, Value(), options);
  ASSERT_FALSE(r.ok()) << source.substr(0, 80);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
}

TEST(JinjaSafety, DeepNestingIsRejectedAtParse) {
  ExpectExhausted("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  ExpectExhausted("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}");
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  ExpectExhausted(chain + " }}");
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 5000; ++i) filters += " | trim";
  ExpectExhausted(filters + " }}");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  ExpectExhausted(ifs);
  ExpectExhausted("{{ " + std::string(5000, '-') + "1 }}");
}

TEST(JinjaSafety, UnboundedRecursionAndLoopsAreCut) {
  ExpectExhausted("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  RenderOptions few_loops;
  few_loops.limits.max_loop_iterations = 20000;
  ExpectExhausted(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      few_loops);
  ExpectExhausted("{{ range(1000000) | length }}");
  ExpectExhausted("{{ range(-9223372036854775807, 9223372036854775807) | length }}");
}

TEST(JinjaSafety, OutputAndValueGrowthIsBounded) {
  ExpectExhausted("{{ 'x' * 1000000000000 }}");
  ExpectExhausted("{{ [1, 2] * 1000000000000 }}");
  RenderOptions small_budget;
  small_budget.limits.max_work = 2'000'000;
  ExpectExhausted(
      "{% set ns = namespace(s='xy') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}",
      small_budget);
  ExpectExhausted(
      "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% "
      "endfor %}",
      small_budget);
  RenderOptions small_output;
  small_output.limits.max_output_bytes = 100000;
  ExpectExhausted(
      "{% for i in range(100000) %}{% for j in range(1000) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% "
      "endfor %}",
      small_output);
  RenderOptions small;
  small.limits.max_output_bytes = 10;
  StatusOr<std::string> r = Render("{{ 'a' * 5 }}{{ 'b' * 6 }}", Value(), small);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(JinjaSafety, DeepValuesAndCyclesAreSafe) {
  // 100k nested lists: built, measured and freed without recursion.
  EXPECT_EQ(RenderOrError(
                "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}"
                "{% endfor %}{{ ns.l | length }}"),
            "1");
  ExpectExhausted(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor "
      "%}{{ ns.l }}");
  ExpectExhausted(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}"
      "{{ ns.l | tojson }}");
  EXPECT_EQ(Render("{% set l = [] %}{{ l.append(l) }}").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% set a = [] %}{% set b = [a] %}{{ a.append(b) }}").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.me = ns %}").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Render("{% set ns = namespace(l=[]) %}{% set ns.l = [[ns]] %}").status().code(),
            StatusCode::kInvalidArgument);
  // A `caller` smuggled out of its call block cannot be invoked after the block ends.
  EXPECT_EQ(Render("{% set ns = namespace() %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
                   "{% call m() %}x{% endcall %}{{ ns.c() }}")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(JinjaSafety, HostileJsonInputIsRejected) {
  EXPECT_FALSE(ParseJson(std::string(100000, '[')).ok());
  EXPECT_FALSE(ParseJson(std::string(100000, '[') + std::string(100000, ']')).ok());
  EXPECT_FALSE(ParseJson("{\"a\": \"\xff\"}").ok());
  EXPECT_FALSE(ParseJson("[1, 2").ok());
  EXPECT_TRUE(ParseJson("{\"b\": 1, \"a\": [1.5, null, true, \"\\u00e9\"]}").ok());
}

TEST(JinjaValue, PythonFloatFormatting) {
  EXPECT_EQ(FormatPyFloat(1.0), "1.0");
  EXPECT_EQ(FormatPyFloat(0.1), "0.1");
  EXPECT_EQ(FormatPyFloat(1e22), "1e+22");
  EXPECT_EQ(FormatPyFloat(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(FormatPyFloat(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatPyFloat(-2.5), "-2.5");
}

}  // namespace
}  // namespace tandem::jinja
