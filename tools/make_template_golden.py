#!/usr/bin/env python3
"""Golden renders of chat templates for src/model/chat_template_test.cc.

Renders every template in tests/data/templates/ over a set of conversations with Python
jinja2 configured exactly as Hugging Face transformers' apply_chat_template does
(ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, tojson = json.dumps(ensure_ascii=False, ...), raise_exception, strftime_now), after
the same input preprocessing Tandem (and vLLM) applies: tool-call arguments given as a JSON
string are parsed into an object, and list content is joined into a string ("\\n" between
text parts) for templates that do not loop over content.

Also writes tests/data/jinja_expression_golden.json: single-feature templates rendered over
fixed variables (the language unit tests of src/model/jinja_test.cc).

Writes tests/data/chat_template_golden/<template>.json:
  {"template": "templates/<name>.jinja", "content_format": "string"|"openai",
   "now_unix_seconds": N, "cases": [{"name", "messages", "tools", "add_generation_prompt",
   "bos_token", "eos_token", "kwargs", and "expected" or "expected_error" + "error_kind"}]}
error_kind is "raise" (the template called raise_exception; the message must match) or
"other" (any other jinja2 error; the C++ side must fail too).

Usage: python3 tools/make_template_golden.py   (needs: pip install jinja2)
"""
import copy
import datetime
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
NOW_UNIX_SECONDS = 1717243200  # 2024-06-01 12:00:00 UTC, for strftime_now

# name -> (bos_token, eos_token, content_format)
TEMPLATES = {
    "gemma3": ("<bos>", "<eos>", "openai"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", "string"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>", "string"),
    "qwen2.5": ("", "<|im_end|>", "string"),
    "qwen3": ("", "<|im_end|>", "string"),
    "glm45": ("", "<|endoftext|>", "openai"),
    "hermes": ("<|begin_of_text|>", "<|im_end|>", "string"),
    "glm46": ("", "<|endoftext|>", "openai"),
    "glm47-flash": ("", "<|endoftext|>", "openai"),
    "deepseek-v3.1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "string"),
}


class TemplateRaised(Exception):
    pass


def make_env():
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW_UNIX_SECONDS, tz=datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def preprocess(messages, content_format):
    messages = copy.deepcopy(messages)
    for m in messages:
        if content_format == "string" and isinstance(m.get("content"), list):
            texts = []
            for part in m["content"]:
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
            m["content"] = "\n".join(texts)
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                try:
                    parsed = json.loads(fn["arguments"])
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    fn["arguments"] = parsed
    return messages


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Forecast days"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "  Query text  "},
                "filters": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
                "options": {
                    "type": "object",
                    "additionalProperties": {"type": "number"},
                    "description": "Numeric options",
                },
                "exact": {"type": ["boolean", "integer"], "description": "Exact match"},
            },
            "required": ["query"],
        },
    },
}


NULLABLE_TOOL = {
    "type": "function",
    "function": {
        "name": "set_flag",
        "description": "Set or clear a flag.",
        "parameters": {"type": "object",
                       "properties": {"value": {"type": ["boolean", "null"], "description": "New value"}}},
    },
}


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def cases():
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    user = {"role": "user", "content": "Hello! How are you?"}
    out = []

    def add(name, messages, tools=None, agp=True, kwargs=None):
        out.append({"name": name, "messages": messages, "tools": tools, "add_generation_prompt": agp,
                    "kwargs": kwargs or {}})

    add("user_only", [user])
    add("user_only_no_gen", [user], agp=False)
    add("system_user", [sys_msg, user])
    add("multi_turn", [sys_msg, user, {"role": "assistant", "content": "I'm fine, thanks."},
                       {"role": "user", "content": "Tell me a joke."}])
    add("multi_turn_no_system_no_gen", [user, {"role": "assistant", "content": "Great!"},
                                        {"role": "user", "content": "Bye"},
                                        {"role": "assistant", "content": "Goodbye."}], agp=False)
    add("whitespace_content", [{"role": "system", "content": "  Be brief.\n\n"},
                               {"role": "user", "content": "\n  spaced   out  \n"},
                               {"role": "assistant", "content": " ok \n"},
                               {"role": "user", "content": "\tagain\t"}])
    add("unicode", [{"role": "user", "content": "Grüße 你好 🙂 \"quoted\" back\\slash <tag> & 'single'"}])
    add("list_content", [{"role": "system", "content": [{"type": "text", "text": "System in parts."}]},
                         {"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                      {"type": "text", "text": "Part two."}]}])
    add("tools_user", [sys_msg, {"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER_TOOL, SEARCH_TOOL])
    add("tools_no_system", [{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER_TOOL])
    add("tool_call_round_trip", [
        sys_msg,
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("call_1", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\", \"days\": 3}")]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
    ], tools=[WEATHER_TOOL])
    add("tool_call_then_answer_no_gen", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            call("call_1", "get_weather", {"city": "Paris", "days": 1})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny in Paris."},
    ], tools=[WEATHER_TOOL], agp=False)
    add("parallel_tool_calls", [
        {"role": "user", "content": "Weather in Paris and Rome; search docs for 'rain'."},
        {"role": "assistant", "content": "", "tool_calls": [
            call("a", "get_weather", "{\"city\": \"Paris\"}"),
            call("b", "get_weather", "{\"city\": \"Rome\"}"),
            call("c", "search_docs", json.dumps({"query": "rain \"heavy\"\nnow", "filters": ["x", "ü"],
                                                 "options": {"k": 1.5, "n": 10}, "exact": None,
                                                 "flag": True}))]},
        {"role": "tool", "tool_call_id": "a", "content": "18C"},
        {"role": "tool", "tool_call_id": "b", "content": "25C"},
        {"role": "tool", "tool_call_id": "c", "content": "no results"},
    ], tools=[WEATHER_TOOL, SEARCH_TOOL])
    add("tool_args_not_json", [
        {"role": "user", "content": "Call it."},
        {"role": "assistant", "content": "", "tool_calls": [call("z", "get_weather", "not json {")]},
    ], tools=[WEATHER_TOOL], agp=False)
    add("enable_thinking_false", [sys_msg, user], kwargs={"enable_thinking": False})
    add("enable_thinking_true", [user], kwargs={"enable_thinking": True})
    add("tools_thinking_off", [{"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER_TOOL],
        kwargs={"enable_thinking": False})
    add("reasoning_content", [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Simple arithmetic: 2+2=4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "<think>\nAdd three and three.\n</think>\n\n6"},
    ], agp=False)
    add("think_in_history", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>greet back</think>Hello there!"},
        {"role": "user", "content": "How are you?"},
    ])
    add("empty_tools_multi_turn", [user, {"role": "assistant", "content": "Fine."},
                                   {"role": "user", "content": "Good."}], tools=[])
    add("tools_multi_turn_system", [sys_msg, {"role": "user", "content": "Hi"},
                                    {"role": "assistant", "content": "Hello!"},
                                    {"role": "user", "content": "Weather in Lima, 2 days, fahrenheit?"},
                                    {"role": "assistant", "content": None, "tool_calls": [
                                        call("w1", "get_weather",
                                             "{\"city\": \"Lima\", \"days\": 2, \"unit\": \"fahrenheit\"}")]},
                                    {"role": "tool", "tool_call_id": "w1", "content": "{\"temp\": 70}"}],
        tools=[WEATHER_TOOL, SEARCH_TOOL])
    add("tools_nullable_type", [{"role": "user", "content": "Clear it."}], tools=[NULLABLE_TOOL])
    add("alternation_error", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    add("empty_messages", [], agp=True)
    return out


# Language-feature cases (template, rendered with UNIT_VARS) -> jinja_expression_golden.json.
UNIT_VARS = {"s": "abcdef", "items": ["x", "y", "z"], "n": 7, "d": {"b": 2, "a": 1}, "nothing": None,
     "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "u": "héllo wörld"}
UNIT_CASES = [
 "{{ s[1:] }}|{{ s[:2] }}|{{ s[:-1] }}|{{ s[-2:] }}|{{ s[::-1] }}|{{ s[4:2] }}|{{ s[::2] }}|{{ items[1:] }}",
 "{{ u[1:4] }}|{{ u|length }}|{{ u|upper }}|{{ u[-1] }}",
 "{{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 10/5 }}",
 "{{ 1e20 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 2.5e-7 }}",
 "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }}",
 "{{ [1,'a',None,True,1.5,{'k':'v'}] }} {{ (1,) }} {{ (1, 'b') }} {{ {'a': \"it's\"} }} {{ ['a\\nb'] }}",
 "{{ none }} {{ None }} {{ true }} {{ True }} {{ false }}|{{ undefined_thing }}|",
 "{{ 1 == 1.0 }} {{ true == 1 }} {{ [1,2] == [1,2] }} {{ {'a':1} == {'a':1} }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}",
 "{{ 'a' in 'abc' }} {{ 1 in [1,2] }} {{ 'a' in {'a':1} }} {{ 'z' not in 'abc' }} {{ 'x' in missing }}",
 "{{ not missing }} {{ missing is defined }} {{ missing is undefined }} {{ nothing is none }} {{ nothing is not none }} {{ n is number }} {{ true is number }} {{ true is integer }}",
 "{{ s is string }} {{ d is mapping }} {{ items is sequence }} {{ d is iterable }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ true is true }} {{ 0 is false }}",
 "{{ 'x' if nothing else 'y' }}|{{ 'x' if n }}|{{ 'x' if nothing }}|{{ n and 'yes' }}|{{ nothing or 'fallback' }}|{{ '' and 'never' }}",
 "{{ '  hi  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ ' a '.strip() }}|{{ 'xay'.lstrip('x') }}|{{ 'xay'.rstrip('y') }}",
 "{{ 'hello world-foo (bar' | title }}|{{ 'hELLO' | capitalize }}|{{ 'they\\'re bill\\'s 2nd' .title() }}|{{ 'Ab' | lower }}|{{ 'Ab' | upper }}",
 "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x  y '.split(None, 1) }}",
 "{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'héllo'.find('l') }} {{ 'abcabc'.count('b') }}",
 "{{ 'a-{}-{}'.format(1, 'x') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='N') }} {{ ', '.join(['a', 'b']) }}",
 "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.a }} {{ d['b'] }}",
 "{{ items | length }} {{ d | count }} {{ items | join('-') }} {{ items | first }} {{ items | last }} {{ [] | first }}|{{ items | reverse | list }} {{ s | reverse }}",
 "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ ['b', 'A', 'a'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'a', 'B'] | unique | list }}",
 "{{ d | dictsort }} {{ d | dictsort(by='value', reverse=true) }} {{ d | items | list }} {{ d | list }}",
 "{{ msgs | selectattr('role', 'equalto', 'user') | list }} {{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ msgs | map(attribute='role') | join(',') }}",
 "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('equalto', 2) | list }} {{ ['a', 'b'] | map('upper') | list }} {{ [0, 1, '', 'x'] | select | list }}",
 "{{ missing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ nothing | default('d') }} {{ missing | d('x') }}",
 "{{ '42' | int }} {{ 'x' | int }} {{ '3.5' | int }} {{ 3.9 | int }} {{ 'x' | int(7) }} {{ '2.5' | float }} {{ 3 | float }} {{ 'q' | float }} {{ 5 | string }} {{ [1] | string }}",
 "{{ 3 | round }} {{ 2.5 | round }} {{ 2.675 | round(2) }} {{ 1.25 | round(1) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(0, 'floor') }} {{ -3 | abs }} {{ -2.5 | abs }}",
 "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x\\ny' | indent('> ') }}",
 "{{ '<a href=\"x\">&\\'' | escape }} {{ '<b>' | safe }} {{ 'one two  three' | wordcount }} {{ [1, 2, 3] | sum }} {{ [3, 1] | max }} {{ [3, 1] | min }}",
 "{{ d | tojson }} {{ 'é<>\"\\\\' | tojson }} {{ [1, 2.5, none, true, 'x'] | tojson }} {{ {} | tojson }} {{ [] | tojson(indent=2) }}",
 "{{ {'a': [1, {'b': None}], 'c': {}} | tojson(indent=2) }}",
 "{{ {'a': 1, 'b': [1, 2]} | tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}",
 "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
 "{% for x in [1, 2, 3] %}{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}",
 "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{{ loop.last }}{% endfor %}",
 "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}",
 "{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in missing %}a{% else %}none{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for k in d %}{{ k }}{% endfor %}",
 "{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
 "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
 "{% if true %}{% set w = 1 %}{% endif %}{{ w }}|{% for i in [1] %}{% set z = 2 %}{% endfor %}{{ z }}|",
 "{% set ns = namespace(total=0, names=[]) %}{% for m in msgs %}{% set ns.total = ns.total + 1 %}{% set ns.names = ns.names + [m.role] %}{% endfor %}{{ ns.total }} {{ ns.names }}",
 "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t %}x{{ 1 + 1 }}y{% endset %}{{ t }}|{% set u | upper %}abc{% endset %}{{ u }}",
 "{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ varargs }}-{{ kwargs }}{% endmacro %}{{ m(1) }} {{ m(1, 3, 4) }} {{ m(1, c=5) }} {{ m(b=9, a=8) }}",
 "{% macro f(x) %}{{ x }}{% if x > 0 %}{{ f(x - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
 "{% set y = 5 %}{% macro g() %}{{ y }}{% endmacro %}{% set y = 6 %}{{ g() }}",
 "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ n }}{% endcall %}",
 "{% macro row(x) %}[{{ caller(x * 2) }}]{% endmacro %}{% call(v) row(4) %}v={{ v }}{% endcall %}",
 "{% filter upper %}abc{{ n }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|{% raw %}{{ not rendered }}{% endraw %}",
 "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
 "{{ 'a' 'b' }} {{ 1, 2 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 * -1 }} {{ - 2 | abs }} {{ not 1 == 2 }} {{ 10 - -2 }}",
 "{{ msgs[0].role }} {{ msgs[-1]['content'] }} {{ msgs[5] }}|{{ msgs.0.content }} {{ nothing.attr }}|{{ d.missing }}|",
 "{{ strftime_now('%Y-%m-%d %H:%M') }}",
 "{#- comment -#}  a  {#- c2 #} b {# c3 -#} c",
 "  {% if true %}\n  x\n  {% endif %}\n  y\n",
 "a\n  {# c #}\nb\n  {%+ if true %}p{% endif %}\n{% if true +%}\nq{% endif %}",
 "a {{ 'x' }}  \n  {{- 'y' }} {{ 'z' -}}  \n  w",
 "line1\r\nline2\rline3\n\n",
 "{% for i in range(2) %}\n  {{ i }}\n{% endfor %}\n",
 "{%- set x = 1 -%}\n\n  {{- x -}}  \n\n{%- if x %} yes {% endif -%}\n",
 "{{ 'a\\tb\\x41\\u00e9\\U0001F600\\d\\101' }}",
 "{{ 'abc' | list }}|{{ 12 | round(-1) }}|{{ [1, 2, 3][::-1] }}",
]


def write_unit_golden(env):
    results = []
    for src in UNIT_CASES:
        try:
            results.append({"template": src, "expected": env.from_string(src).render(**UNIT_VARS)})
        except Exception as e:  # noqa: BLE001
            results.append({"template": src, "expected_error": "%s: %s" % (type(e).__name__, e)})
    path = os.path.join(DATA, "jinja_expression_golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"vars": UNIT_VARS, "now_unix_seconds": NOW_UNIX_SECONDS, "cases": results}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    print("%s: %d cases" % (path, len(results)))


def render(env, source, case, bos, eos, content_format):
    tmpl = env.from_string(source)
    messages = preprocess(case["messages"], content_format)
    return tmpl.render(messages=messages, tools=copy.deepcopy(case["tools"]), documents=None,
                       add_generation_prompt=case["add_generation_prompt"], bos_token=bos, eos_token=eos,
                       **case["kwargs"])


def main():
    env = make_env()
    write_unit_golden(env)
    out_dir = os.path.join(DATA, "chat_template_golden")
    os.makedirs(out_dir, exist_ok=True)
    for name, (bos, eos, content_format) in TEMPLATES.items():
        with open(os.path.join(DATA, "templates", name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        results = []
        for case in cases():
            rec = dict(case)
            rec["bos_token"] = bos
            rec["eos_token"] = eos
            try:
                rec["expected"] = render(env, source, case, bos, eos, content_format)
            except TemplateRaised as e:
                rec["expected_error"] = str(e)
                rec["error_kind"] = "raise"
            except Exception as e:  # noqa: BLE001 - any jinja2/Python error is a golden "fails"
                rec["expected_error"] = "%s: %s" % (type(e).__name__, e)
                rec["error_kind"] = "other"
            results.append(rec)
        doc = {"template": "templates/%s.jinja" % name, "content_format": content_format,
               "now_unix_seconds": NOW_UNIX_SECONDS, "cases": results}
        path = os.path.join(out_dir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        ok = sum(1 for r in results if "expected" in r)
        print("%s: %d cases (%d render, %d error)" % (path, len(results), ok, len(results) - ok))


if __name__ == "__main__":
    main()
