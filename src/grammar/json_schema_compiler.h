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
// may be left out), a single optional space after ':' and ',', no exponent in numbers,
// at most 15 integer and 15 fraction digits, keys of properties the schema does not
// name at most 64 characters. Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"
#include "grammar/grammar.h"

namespace tandem::grammar {

// `schema_json` is the schema as JSON text. InvalidArgument for malformed JSON, a
// schema that is not an object/boolean, unsupported keywords, bad $ref, an empty range.
StatusOr<Grammar> CompileJsonSchema(std::string_view schema_json);

// Any JSON object (`response_format: json_object`).
StatusOr<Grammar> JsonObjectGrammar();

// Adds the rules of `schema_json` to `b` and returns the rule that matches one value
// (used to embed argument schemas in a tool-call grammar). `prefix` keeps rule names
// of several schemas apart.
StatusOr<int> AddJsonSchemaRules(std::string_view schema_json, const std::string& prefix, GrammarBuilder& b);

}  // namespace tandem::grammar
