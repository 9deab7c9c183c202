// JSON Schema -> Grammar, for `response_format: json_schema`, `structured_outputs.json`
// and the arguments of forced tool calls.
//
// Supported keywords: type (one or a list), properties, required,
// additionalProperties (false, true or a schema; absent = no other properties, as
// xgrammar's strict mode), enum, const, items, minItems, maxItems, anyOf, oneOf (as
// anyOf: give alternatives that do not overlap), allOf with one schema, $ref to "#",
// "#/$defs/..." or "#/definitions/...", minLength, maxLength, pattern, format (date,
// time, date-time, email, uuid, ipv4, ipv6, hostname, uri), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (integer bounds for type number), maxProperties
// (bounds the additional properties). Annotations
// (title, description, default, examples, $schema, $id, $comment, deprecated, readOnly,
// writeOnly, $defs, definitions) are ignored. Any other keyword is InvalidArgument
// naming it and where it is ("unsupported JSON Schema keyword 'not' at
// /properties/a"), never silently dropped.
//
// The output: properties in the schema's order (required ones always, optional ones
// may be left out), a single optional space after ':' and ',' (or any JSON whitespace
// between tokens, JsonSchemaOptions::any_whitespace), no exponent in numbers, at most
// 15 integer and 15 fraction digits, keys of properties the schema does not name at
// most 64 characters. Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace tandem::grammar {

// Where an object schema has no additionalProperties, may the output hold properties
// it does not name?
enum class UnnamedProperties {
  kUnlessNamed,  // only if the schema names none (no "properties"): xgrammar's strict mode
  kNever,        // never (vLLM's disable_additional_properties: true)
  kAlways,       // always, JSON Schema's default (disable_additional_properties: false)
};

struct JsonSchemaOptions {
  // Any JSON whitespace (space, tab, newline, CR) between tokens, as vLLM's default
  // (disable_any_whitespace: false); else one optional space after ':' and ','.
  bool any_whitespace = false;
  UnnamedProperties unnamed_properties = UnnamedProperties::kUnlessNamed;
};

// `schema_json` is the schema as JSON text. InvalidArgument for malformed JSON, a
// schema that is not an object/boolean, unsupported keywords, bad $ref, an empty range.
StatusOr<Grammar> CompileJsonSchema(std::string_view schema_json, const JsonSchemaOptions& options = {});

// Any JSON object (`response_format: json_object`).
StatusOr<Grammar> JsonObjectGrammar(const JsonSchemaOptions& options = {});

// Adds the rules of `schema_json` to `b` and returns the rule that matches one value
// (used to embed argument schemas in a tool-call grammar). `prefix` keeps rule names
// of several schemas apart.
StatusOr<int> AddJsonSchemaRules(std::string_view schema_json, const std::string& prefix, GrammarBuilder& b,
                                 const JsonSchemaOptions& options = {});

}  // namespace tandem::grammar
