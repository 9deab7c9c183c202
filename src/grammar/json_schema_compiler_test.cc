#include "grammar/json_schema_compiler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/grammar_automaton.h"

namespace tandem::grammar {
namespace {

struct Case {
  const char* schema;
  std::vector<const char*> good;
  std::vector<const char*> bad;
};

TEST(JsonSchemaTest, AcceptsValidAndRefusesInvalidInstances) {
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]})",
       {R"({"a": 1})", R"({"a": -20, "b": "x"})", R"({"a":3,"b":"\n\u00e9"})"},
       {R"({"b": "x"})", R"({"a": 1.5})", R"({"a": 1, "c": 2})", R"({"a": 01})"}},
      {R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3})",
       {"[true, false]", "[true,true,false]"},
       {"[true]", "[true, true, true, true]", "[1, 2]"}},
      {R"({"enum": ["red", 3, null]})", {R"("red")", "3", "null"}, {R"("blue")"}},
      {R"({"const": {"k": [1]}})", {R"({"k":[1]})"}, {R"({"k":[2]})"}},
      {R"({"anyOf": [{"type": "null"}, {"type": "number", "minimum": 0, "maximum": 1}]})",
       {"null", "0", "0.25", "1", "1.0"},
       {"1.5", "-0.5", "2"}},
      {R"({"type": "integer", "minimum": -15, "maximum": 130})",
       {"-15", "-1", "0", "7", "99", "130"},
       {"-16", "131", "200", "-0"}},
      {R"({"type": "integer", "exclusiveMinimum": 5})", {"6", "10", "123456"}, {"5", "0", "-7"}},
      // Decimal bounds on numbers, exact on both sides and across zero.
      {R"({"type": "number", "minimum": 0.5, "maximum": 2.25})",
       {"0.5", "0.50", "0.75", "1", "1.0", "2", "2.25", "2.2", "2.249"},
       {"0.49", "0.4", "0", "2.26", "2.3", "3", "-1"}},
      {R"({"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 0})",
       {"-1.49", "-1", "-0.001", "-1.4999"},
       {"-1.5", "-1.50", "-2", "0", "0.0", "0.1", "-1.6"}},
      {R"({"type": "number", "exclusiveMinimum": 5})", {"5.01", "6", "5.0001", "10.5"}, {"5", "5.0", "5.00", "4.99", "-6"}},
      {R"({"type": "number", "minimum": 0.25, "maximum": 0.75})", {"0.25", "0.5", "0.7", "0.75", "0.750"}, {"0.2", "0.76", "0", "1"}},
      {R"({"type": "number", "maximum": -0.125})", {"-0.125", "-0.13", "-1", "-100.5"}, {"-0.12", "0", "-0.1", "1"}},
      {R"({"type": "number", "minimum": 0.1, "exclusiveMinimum": 0.1})", {"0.11", "1"}, {"0.1", "0.10", "0.09"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("abc")", R"("é\"")"}, {R"("a")", R"("abcd")"}},
      {R"({"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"})", {R"("AB12")"}, {R"("ab12")", R"("AB")"}},
      {R"({"type": "string", "format": "date"})", {R"("2024-02-28")"}, {R"("2024-13-01")", R"("x")"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
          "required": ["next"]}}, "$ref": "#/$defs/node"})",
       {R"({"next": null})", R"({"next": {"next": null}})"},
       {R"({})"}},
      {R"({"type": "object", "additionalProperties": {"type": "integer"}})", {R"({})", R"({"x": 1, "y": 2})"}, {R"({"x": "1"})"}},
      {R"({"type": ["string", "null"]})", {R"("s")", "null"}, {"1"}},
  };
  for (const Case& c : cases) {
    StatusOr<Grammar> g = CompileJsonSchema(c.schema);
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().message();
    GrammarAutomaton a(std::move(*g));
    for (const char* s : c.good) EXPECT_TRUE(a.IsAccepting(a.Advance(a.initial(), s))) << c.schema << " should accept " << s;
    for (const char* s : c.bad) EXPECT_FALSE(a.IsAccepting(a.Advance(a.initial(), s))) << c.schema << " should refuse " << s;
  }
}

bool Accepts(StatusOr<Grammar> g, const char* text) {
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return false;
  GrammarAutomaton a(std::move(*g));
  return a.IsAccepting(a.Advance(a.initial(), text));
}

// vLLM's disable_any_whitespace: false: any JSON whitespace between tokens; by default
// one optional space after ':' and ','.
TEST(JsonSchemaTest, AnyWhitespaceOnlyWhenAsked) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}},
                           "b": {"type": "object"}}, "required": ["a"]})";
  const char* spaced = "{\n  \"a\" : [ 1 ,\t2 ] ,\r\n  \"b\": { \"x\" : { } }\n}";
  JsonSchemaOptions any;
  any.any_whitespace = true;
  EXPECT_TRUE(Accepts(CompileJsonSchema(schema, any), spaced));
  EXPECT_TRUE(Accepts(CompileJsonSchema(schema, any), R"({"a":[],"b":{}})"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(schema, any), "{ \"a\": [ ] }"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(schema, any), "{\"a\": [1 2]}"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(schema), spaced));
  EXPECT_TRUE(Accepts(CompileJsonSchema(schema), R"({"a": [1, 2], "b": {"x": {}}})"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(schema), "{ \"a\": []}"));
  EXPECT_TRUE(Accepts(JsonObjectGrammar(any), "{ \"k\" :\n[ true , null ] }"));
  EXPECT_FALSE(Accepts(JsonObjectGrammar(), "{ \"k\": 1}"));
}

// vLLM's disable_additional_properties: true = none unless additionalProperties allows
// them; false = JSON Schema's default; unset = only where the schema names none.
TEST(JsonSchemaTest, UnnamedPropertiesFollowTheOption) {
  const char* named = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  const char* unnamed = R"({"type": "object"})";
  const char* allowed = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true})";
  JsonSchemaOptions never, always;
  never.unnamed_properties = UnnamedProperties::kNever;
  always.unnamed_properties = UnnamedProperties::kAlways;
  EXPECT_FALSE(Accepts(CompileJsonSchema(named), R"({"a": 1, "z": 2})"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(unnamed), R"({"z": 2})"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(named, never), R"({"a": 1, "z": 2})"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(unnamed, never), R"({"z": 2})"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(unnamed, never), "{}"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(allowed, never), R"({"a": 1, "z": 2})"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(named, always), R"({"a": 1, "z": [2]})"));
  EXPECT_TRUE(Accepts(CompileJsonSchema(unnamed, always), R"({"z": 2})"));
  EXPECT_FALSE(Accepts(CompileJsonSchema(
                           R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false})",
                           always),
                       R"({"a": 1, "z": 2})"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamed) {
  for (auto [schema, keyword] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type": "object", "properties": {"a": {"not": {"type": "string"}}}})", "'not' at '/properties/a'"},
           {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
           {R"({"type": "string", "format": "color"})", "'format'"},
           {R"({"type": "number", "minimum": 0.5, "exclusiveMaximum": 0.5})", "'minimum'"},
           {R"({"$ref": "#/$defs/missing"})", "'$ref'"},
           {R"({"type": "integer", "minimum": 5, "maximum": 1})", "'minimum'"},
           {R"({"type": "wat"})", "'type'"},
       }) {
    Status s = CompileJsonSchema(schema).status();
    EXPECT_FALSE(s.ok()) << schema;
    EXPECT_NE(s.message().find(keyword), std::string::npos) << s.message();
  }
  EXPECT_FALSE(CompileJsonSchema("{not json").ok());
  EXPECT_FALSE(CompileJsonSchema("[1]").ok());
}

// Decimal ranges against arithmetic: random bounds with up to 3 decimals, inclusive or
// exclusive, and random candidates; the grammar accepts exactly the numbers in range.
TEST(JsonSchemaTest, NumberRangesMatchArithmetic) {
  std::mt19937 rng(5);
  auto decimal = [&](int max_int) {
    const int scale = std::uniform_int_distribution<int>(0, 3)(rng);
    const int64_t units = std::uniform_int_distribution<int64_t>(-max_int * 1000, max_int * 1000)(rng);
    int64_t div = 1;
    for (int i = 0; i < 3 - scale; ++i) div *= 10;
    return static_cast<double>(units / div * div) / 1000.0;
  };
  auto text = [](double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    std::string t = buf;
    if (t[0] == '-' && std::stod(t) == 0) t = t.substr(1);  // no "-0" candidates
    return t;
  };
  for (int round = 0; round < 60; ++round) {
    double lo = decimal(3), hi = decimal(3);
    if (lo > hi) std::swap(lo, hi);
    const bool xlo = rng() % 2, xhi = rng() % 2;
    const bool has_lo = rng() % 4 != 0, has_hi = rng() % 4 != 0;
    nlohmann::json schema = {{"type", "number"}};
    if (has_lo) schema[xlo ? "exclusiveMinimum" : "minimum"] = lo;
    if (has_hi) schema[xhi ? "exclusiveMaximum" : "maximum"] = hi;
    StatusOr<Grammar> g = CompileJsonSchema(schema.dump());
    const bool empty = has_lo && has_hi && (lo > hi || (lo == hi && (xlo || xhi)));
    if (empty) {
      EXPECT_FALSE(g.ok()) << schema.dump();
      continue;
    }
    ASSERT_TRUE(g.ok()) << schema.dump() << ": " << g.status().message();
    GrammarAutomaton a(std::move(*g));
    for (int k = 0; k < 40; ++k) {
      const double v = k < 4 ? (k % 2 ? lo : hi) : decimal(4);
      for (int decimals : {0, 1, 2, 3, 4}) {
        const std::string t = text(v, decimals);
        const double x = std::stod(t);
        const bool in = (!has_lo || (xlo ? x > lo : x >= lo)) && (!has_hi || (xhi ? x < hi : x <= hi));
        EXPECT_EQ(a.IsAccepting(a.Advance(a.initial(), t)), in) << schema.dump() << " on " << t;
      }
    }
  }
}

// oneOf compiles only when no value can match two alternatives (else an output the
// grammar allows could fail oneOf): disjoint kinds, disjoint value sets, a required
// discriminator with different consts, a closed object against a required key it lacks.
TEST(JsonSchemaTest, OneOfNeedsAlternativesThatCannotBothMatch) {
  for (const char* schema : {
           R"({"oneOf": [{"type": "null"}, {"type": "string"}]})",
           R"({"oneOf": [{"type": "integer"}, {"type": "boolean"}, {"enum": ["a", "b"]}]})",
           R"({"oneOf": [{"enum": [1, 2]}, {"const": 3}]})",
           R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
                          "required": ["kind"]},
                         {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]}]})",
           R"({"oneOf": [{"type": "object", "properties": {"cat": {"type": "string"}}, "required": ["cat"],
                          "additionalProperties": false},
                         {"type": "object", "properties": {"dog": {"type": "integer"}}, "required": ["dog"],
                          "additionalProperties": false}]})",
           R"({"$defs": {"s": {"type": "string"}}, "oneOf": [{"$ref": "#/$defs/s"}, {"type": "array"}]})",
       }) {
    StatusOr<Grammar> g = CompileJsonSchema(schema);
    EXPECT_TRUE(g.ok()) << schema << ": " << g.status().message();
  }
  for (const char* schema : {
           R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})",
           R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})",
           R"({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]})",
           R"({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                         {"type": "object", "properties": {"b": {"type": "integer"}}}]})",
           R"({"oneOf": [{}, {"type": "null"}]})",
       }) {
    Status s = CompileJsonSchema(schema).status();
    EXPECT_FALSE(s.ok()) << schema;
    EXPECT_NE(s.message().find("'oneOf'"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tandem::grammar
