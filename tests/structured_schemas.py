"""JSON schemas for tests/test_structured_outputs.py and bench/structured_output_bench.py:
every keyword the grammar compiler supports, each schema bounded (strings have a
maxLength or a format/pattern/enum, arrays a maxItems) so that even a random fixture
model finishes inside max_tokens."""

S = {"type": "string", "maxLength": 12}
I = {"type": "integer", "minimum": -1000, "maximum": 1000}

SCHEMAS = [
    # type
    {"type": "string", "maxLength": 8},
    {"type": "integer", "minimum": 0, "maximum": 99},
    {"type": "number", "minimum": 0, "maximum": 1},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["integer", "null"], "minimum": 0, "maximum": 9},
    # properties, required, additionalProperties
    {"type": "object", "properties": {"name": S, "age": I}, "required": ["name", "age"]},
    {"type": "object", "properties": {"a": S, "b": I, "c": {"type": "boolean"}}, "required": ["c"]},
    {"type": "object", "properties": {"x": I}, "required": ["x"], "additionalProperties": False},
    {"type": "object", "properties": {"x": I}, "required": ["x"],
     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 5}, "maxProperties": 3},
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 2},
    {"type": "object", "properties": {"opt1": S, "opt2": I}},
    {"type": "object", "properties": {"outer": {"type": "object", "properties": {"inner": S}, "required": ["inner"]}},
     "required": ["outer"]},
    # enum, const
    {"enum": ["red", "green", "blue"]},
    {"enum": [1, "two", None, True, 3.5]},
    {"const": "fixed"},
    {"type": "object", "properties": {"kind": {"const": "point"}, "x": I}, "required": ["kind", "x"]},
    {"type": "object", "properties": {"unit": {"enum": ["C", "F"]}, "value": I}, "required": ["unit", "value"]},
    # arrays
    {"type": "array", "items": I, "maxItems": 4},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": S, "minItems": 1, "maxItems": 2},
    {"type": "array", "items": {"type": "array", "items": I, "maxItems": 2}, "maxItems": 2},
    {"type": "array", "maxItems": 0},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
     "required": ["tags"]},
    # anyOf / oneOf
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "boolean"}]},
    {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
    {"type": "object", "properties": {"v": {"anyOf": [S, I]}}, "required": ["v"]},
    {"oneOf": [{"type": "object", "properties": {"cat": S}, "required": ["cat"], "additionalProperties": False},
               {"type": "object", "properties": {"dog": I}, "required": ["dog"], "additionalProperties": False}]},
    {"allOf": [{"type": "integer", "minimum": 3, "maximum": 7}]},
    # $ref / $defs / definitions
    {"$defs": {"p": {"type": "object", "properties": {"x": I, "y": I}, "required": ["x", "y"]}},
     "type": "object", "properties": {"a": {"$ref": "#/$defs/p"}, "b": {"$ref": "#/$defs/p"}}, "required": ["a", "b"]},
    {"definitions": {"c": {"enum": ["r", "g"]}}, "type": "array", "items": {"$ref": "#/definitions/c"}, "maxItems": 3},
    {"$defs": {"t": {"type": "object", "properties": {"v": I, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"},
                                                                         "maxItems": 2}},
                     "required": ["v", "kids"]}},
     "$ref": "#/$defs/t"},
    # string length and pattern
    {"type": "string", "minLength": 3, "maxLength": 5},
    {"type": "string", "minLength": 1, "maxLength": 1},
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
    {"type": "string", "pattern": "^(yes|no)$"},
    {"type": "string", "pattern": "^\\d{3}$"},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-f0-9]{6}$"}}, "required": ["code"]},
    # number and integer ranges
    {"type": "integer", "minimum": -50, "maximum": -10},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
    {"type": "integer", "minimum": 100, "maximum": 12345},
    {"type": "number", "minimum": -5, "maximum": 5},
    {"type": "number", "minimum": 10, "maximum": 20},
    {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 3},
    {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                      "lon": {"type": "number", "minimum": -180, "maximum": 180}},
     "required": ["lat", "lon"]},
    # formats
    {"type": "string", "format": "date"},
    {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "ipv4"},
    {"type": "string", "format": "ipv6"},
    {"type": "string", "format": "hostname"},
    {"type": "string", "format": "uri"},
    # a typical tool-style object with everything together
    {"type": "object", "title": "Event", "description": "an event",
     "properties": {"title": S, "date": {"type": "string", "format": "date"},
                    "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 2},
                    "priority": {"enum": ["low", "high"]}, "duration_min": {"type": "integer", "minimum": 5, "maximum": 480}},
     "required": ["title", "date", "priority"], "additionalProperties": False},
    # decimal bounds (appended: tests pick earlier schemas by index)
    {"type": "number", "exclusiveMinimum": -2.5, "maximum": 0.75},
    {"type": "object", "properties": {"p": {"type": "number", "minimum": 0.05, "exclusiveMaximum": 0.1}},
     "required": ["p"], "additionalProperties": False},
]
