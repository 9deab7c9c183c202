#!/usr/bin/env python3
"""Validates tool calls written by parsers_test against the real `openai` client types.

Usage:
  TANDEM_TOOL_CALL_JSONL=/tmp/calls.jsonl ./build-tools/src/server/parsers/parsers_test
  python3 tools/check_tool_call_json.py /tmp/calls.jsonl

Each line must be one OpenAI `ChatCompletionMessageToolCall` object. Beyond the type
check, `function.arguments` must parse as a JSON object and `id` must start "call_".
Exits 1 on the first bad line, 2 when the file holds no calls.
"""
import json
import sys

from openai.types.chat import ChatCompletionMessageToolCall


def check_line(line: str) -> None:
    call = ChatCompletionMessageToolCall.model_validate(json.loads(line))
    if call.type != "function":
        raise ValueError(f"type is {call.type!r}")
    if not call.id.startswith("call_"):
        raise ValueError(f"id {call.id!r} does not start with call_")
    arguments = json.loads(call.function.arguments)
    if not isinstance(arguments, dict):
        raise ValueError(f"arguments is not a JSON object: {call.function.arguments!r}")
    if not call.function.name:
        raise ValueError("empty function name")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    count = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                check_line(line)
            except Exception as error:  # noqa: BLE001 - report any failure with its line
                print(f"{sys.argv[1]}:{number}: {error}\n  {line.strip()}", file=sys.stderr)
                return 1
            count += 1
    if count == 0:
        print(f"{sys.argv[1]}: no tool calls", file=sys.stderr)
        return 2
    print(f"{count} tool calls valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
