#include "grammar/json_schema_compiler.h"

#include <gtest/gtest.h>

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

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamed) {
  for (auto [schema, keyword] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type": "object", "properties": {"a": {"not": {"type": "string"}}}})", "'not' at '/properties/a'"},
           {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
           {R"({"type": "string", "format": "color"})", "'format'"},
           {R"({"type": "number", "minimum": 0.5})", "'minimum'"},
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
