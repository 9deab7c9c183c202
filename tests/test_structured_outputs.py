"""Structured outputs end to end (README "Structured outputs"): real `tandem serve`
processes on the default model and a fixture; every output under a schema must parse
and validate with the `jsonschema` package (formats included), greedy and sampled,
streamed and not. Also regex / choice / GBNF grammar, forced tool calls, the 400s for
bad input, and finish_reason "length" for a schema that cannot finish in max_tokens."""
import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

from structured_schemas import SCHEMAS
from tandem_procs import Server

FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER  # RFC 3339 "time" (the default checker has draft 3's)


@pytest.fixture(scope="module")
def default_server(tandem_bin, default_model, tmp_path_factory):
    s = Server(tandem_bin, default_model, ["--served-model-name", "m", "--max-model-len", "1024",
                                           "--max-num-seqs", "16"], tmp_path_factory.mktemp("so"), "default")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def fixture_server(tandem_bin, fixture_dir, tmp_path_factory):
    s = Server(tandem_bin, fixture_dir / "llama.gguf", ["--served-model-name", "m", "--max-model-len", "1024"],
               tmp_path_factory.mktemp("sofx"), "fixture")
    yield s
    assert s.stop() == 0


def generate(server, body, stream):
    """(text, finish_reason) of one chat request, streamed or not."""
    body = dict(model="m", **body)
    if not stream:
        r = server.post("/v1/chat/completions", body)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        return choice["message"]["content"] or "", choice["finish_reason"]
    text, finish = "", None
    extra = {k: body.pop(k) for k in list(body) if k.startswith("guided_") or k == "structured_outputs"}
    for chunk in server.client().chat.completions.create(stream=True, extra_body=extra, **body):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


def schema_body(schema, temperature, seed):
    prompt = "Reply with JSON that follows this JSON schema:\n" + json.dumps(schema)
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": 300, "temperature": temperature,
            "seed": seed, "response_format": {"type": "json_schema",
                                              "json_schema": {"name": "s", "schema": schema, "strict": True}}}


def check_all_schemas(server, temperature, recursive_may_run_long=False):
    """Every schema's output finishes and validates. recursive_may_run_long: a random-weight
    model may keep nesting a recursive schema ($ref) past max_tokens (which tree it grows
    depends on the last bits of its logits); such an output may end by "length", and must
    then still have begun as the schema's object."""
    def one(k):
        schema = SCHEMAS[k]
        text, finish = generate(server, schema_body(schema, temperature, 1000 + k), stream=k % 2 == 1)
        return k, text, finish

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(len(SCHEMAS))))
    failures = []
    for k, text, finish in results:
        try:
            if recursive_may_run_long and finish == "length" and "$ref" in json.dumps(SCHEMAS[k]):
                assert text.startswith("{"), text[:40]
                continue
            assert finish == "stop", "finish_reason " + str(finish)
            jsonschema.validate(json.loads(text), SCHEMAS[k], format_checker=FORMATS)
        except (AssertionError, ValueError, jsonschema.ValidationError) as e:
            failures.append((k, SCHEMAS[k], text[:300], str(e)[:300]))
    assert not failures, failures


@pytest.mark.parametrize("temperature", [0, 0.9])
def test_every_schema_validates_on_the_default_model(default_server, temperature):
    assert len(SCHEMAS) >= 50
    check_all_schemas(default_server, temperature)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_every_schema_validates_on_a_fixture(fixture_server, temperature):
    # A random model: only the grammar keeps its output valid.
    check_all_schemas(fixture_server, temperature, recursive_may_run_long=True)


def test_greedy_is_deterministic_and_streaming_agrees(default_server):
    body = schema_body(SCHEMAS[6], 0, 1)
    assert generate(default_server, body, False) == generate(default_server, body, True)


def test_json_object_regex_choice_and_grammar(default_server):
    msgs = [{"role": "user", "content": "Give me a phone number."}]
    text, _ = generate(default_server, {"messages": msgs, "max_tokens": 200, "temperature": 0,
                                        "response_format": {"type": "json_object"}}, False)
    assert isinstance(json.loads(text), dict)
    import re
    for field in ({"structured_outputs": {"regex": r"\(\d{3}\) \d{3}-\d{4}"}}, {"guided_regex": r"\(\d{3}\) \d{3}-\d{4}"}):
        text, finish = generate(default_server, {"messages": msgs, "max_tokens": 50, "temperature": 0.7, "seed": 3,
                                                 **field}, True)
        assert finish == "stop" and re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", text), text
    for field in ({"structured_outputs": {"choice": ["yes", "no"]}}, {"guided_choice": ["yes", "no"]}):
        text, finish = generate(default_server, {"messages": [{"role": "user", "content": "Is ice cold?"}],
                                                 "max_tokens": 10, "temperature": 0, **field}, False)
        assert finish == "stop" and text in ("yes", "no")
    gbnf = 'root ::= "x=" num ("," num)*\nnum ::= [1-9] [0-9]{0,2}\n'
    r = default_server.post("/v1/completions", {"model": "m", "prompt": "Numbers:", "max_tokens": 40,
                                                "temperature": 0, "structured_outputs": {"grammar": gbnf}})
    choice = r.json()["choices"][0]
    if choice["finish_reason"] == "stop":
        assert re.fullmatch(r"x=[1-9][0-9]{0,2}(,[1-9][0-9]{0,2})*", choice["text"]), choice
    else:  # the grammar never has to end: a prefix of a sentence
        assert choice["finish_reason"] == "length" and re.fullmatch(r"x=[0-9,]*", choice["text"]), choice


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"]}}},
]


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_forces_valid_calls(default_server, stream):
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    msgs = [{"role": "user", "content": "What is the weather in Paris for 3 days?"}]
    for choice, want in (("required", None), ({"type": "function", "function": {"name": "get_time"}}, "get_time")):
        body = dict(model="m", messages=msgs, tools=TOOLS, tool_choice=choice, parallel_tool_calls=False,
                    max_tokens=100, temperature=0)
        if stream:
            calls, finish = {}, None
            for chunk in default_server.client().chat.completions.create(stream=True, **body):
                for d in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                    c = calls.setdefault(d.index, {"name": "", "arguments": ""})
                    c["name"] += d.function.name or ""
                    c["arguments"] += d.function.arguments or ""
                finish = (chunk.choices[0].finish_reason if chunk.choices else None) or finish
            calls = list(calls.values())
        else:
            r = default_server.client().chat.completions.create(**body)
            finish = r.choices[0].finish_reason
            calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in r.choices[0].message.tool_calls]
        assert finish == "tool_calls" and len(calls) == 1, (calls, finish)
        assert want is None or calls[0]["name"] == want
        jsonschema.validate(json.loads(calls[0]["arguments"]), schemas[calls[0]["name"]])


@pytest.mark.parametrize("body, field", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "not": {}}}}},
     "response_format.json_schema.schema: unsupported JSON Schema keyword 'not'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array",
                                                                                         "uniqueItems": True}}}},
     "'uniqueItems'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "bogus"}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/nope"}}}},
     "'$ref'"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": "json"}, "response_format"),
    ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex: invalid regex"),
    ({"guided_regex": "a{5,2}"}, "guided_regex"),
    ({"structured_outputs": {"grammar": "root ::= \"a\" undefined-rule"}}, "structured_outputs.grammar"),
    ({"structured_outputs": {"grammar": "root ::= [a-"}}, "structured_outputs.grammar: grammar syntax error"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    ({"structured_outputs": {"json": "{not json"}}, "structured_outputs.json"),
    ({"structured_outputs": {"whitespace_pattern": " "}}, "structured_outputs.whitespace_pattern"),
    ({"structured_outputs": {"regex": "a"}, "guided_choice": ["a"]}, "only one kind of structured output"),
])
def test_bad_input_is_a_400_naming_the_field(default_server, body, field):
    r = default_server.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                     **body})
    assert r.status_code == 400, r.text
    assert field in r.json()["error"]["message"], r.json()


def test_unsatisfiable_within_max_tokens_ends_with_length(default_server):
    schema = {"type": "array", "items": {"type": "integer", "minimum": 1000, "maximum": 9999}, "minItems": 100,
              "maxItems": 100}
    for stream in (False, True):
        text, finish = generate(default_server, schema_body(schema, 0, 1) | {"max_tokens": 12}, stream)
        assert finish == "length" and text.startswith("[")


def test_speculative_decoding_stays_exact(tandem_bin, default_model, tmp_path, default_server):
    spec = Server(tandem_bin, default_model, ["--served-model-name", "m", "--max-model-len", "1024",
                                              "--speculative-config",
                                              '{"method": "ngram", "num_speculative_tokens": 4, '
                                              '"prompt_lookup_max": 3, "prompt_lookup_min": 1}'],
                  tmp_path, "spec")
    try:
        for k in (6, 29, 55 - 1):
            body = schema_body(SCHEMAS[k], 0, 1)
            assert generate(spec, body, False) == generate(default_server, body, False)
    finally:
        assert spec.stop() == 0


def test_pd_through_the_proxy(tandem_bin, fixture_dir, tmp_path, fixture_server):
    """P draws the first token under the grammar, D goes on from the state after it; the
    result equals the colocated one (greedy) and validates."""
    from test_pd import kv_config
    from test_proxy import Proxy, addr
    from tandem_procs import free_port
    model = fixture_dir / "llama.gguf"
    common = ["--served-model-name", "m", "--max-model-len", "1024"]
    procs = []
    try:
        p = Server(tandem_bin, model, common + ["--kv-transfer-config", kv_config("kv_producer", free_port())],
                   tmp_path, "p")
        procs.append(p)
        d = Server(tandem_bin, model, common + ["--kv-transfer-config", kv_config("kv_consumer")], tmp_path, "d")
        procs.append(d)
        proxy = Proxy(tandem_bin, [addr(p)], [addr(d)], tmp_path)
        procs.append(proxy)
        for k in (6, 17, 31, 46, 55):
            for stream in (False, True):
                body = schema_body(SCHEMAS[k], 0, 7)
                got = generate(proxy, body, stream)
                assert got == generate(fixture_server, body, False), (k, got)
                jsonschema.validate(json.loads(got[0]), SCHEMAS[k], format_checker=FORMATS)
        # P alone (the proxy's first step): its one token already obeys the grammar.
        for k in (15, 13, 46):
            body = schema_body(SCHEMAS[k], 0, 7) | {"model": "m", "max_tokens": 1, "kv_transfer_params": {
                "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                "remote_block_ids": None, "remote_host": None, "remote_port": None}}
            first = p.post("/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
            full, _ = generate(fixture_server, schema_body(SCHEMAS[k], 0, 7), False)
            assert first and full.startswith(first), (k, first, full)
        assert "does not fit" not in d.log()
    finally:
        for proc in reversed(procs):
            proc.stop()


@pytest.mark.parametrize("parser", ["glm45", "deepseek_r1"])
def test_reasoning_then_schema(tandem_bin, fixture_dir, tmp_path, parser):
    """With a reasoning parser the grammar lets the reply think freely up to </think>,
    then constrains the rest (glm45: a reply may open with <think>; deepseek_r1: the
    reply is thinking until </think>; a logit_bias on </think> ends it at once and what
    follows validates). With enable_thinking false the grammar applies from the start."""
    s = Server(tandem_bin, fixture_dir / "qwen3.gguf", ["--served-model-name", "m", "--max-model-len", "512",
                                                        "--reasoning-parser", parser], tmp_path, "reasoning")
    try:
        think_end = s.post("/tokenize", {"model": "m", "prompt": "</think>", "add_special_tokens": False}).json()
        assert len(think_end["tokens"]) == 1
        schema = SCHEMAS[17]  # an object with an enum and an integer: no free text after </think>
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 60, "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
        # Unbiased, the random model opens a thinking block it never closes (glm45 lets
        # it open one; deepseek_r1 starts in one): all reasoning, cut by max_tokens.
        choice = s.post("/v1/chat/completions", body).json()["choices"][0]
        assert choice["finish_reason"] == "length" and choice["message"]["content"] is None, choice
        assert choice["message"]["reasoning_content"]
        if parser == "deepseek_r1":
            biased = body | {"logit_bias": {str(think_end["tokens"][0]): 100}}
            choice = s.post("/v1/chat/completions", biased).json()["choices"][0]
            assert choice["finish_reason"] == "stop", choice
            jsonschema.validate(json.loads(choice["message"]["content"]), schema)
        # Without thinking (enable_thinking false) the reply is constrained from the start.
        off = body | {"chat_template_kwargs": {"enable_thinking": False}}
        choice = s.post("/v1/chat/completions", off).json()["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        jsonschema.validate(json.loads(choice["message"]["content"]), schema)
    finally:
        assert s.stop() == 0


def test_every_choice_of_n_obeys_the_schema(default_server):
    """n > 1: each choice walks the grammar on its own (its own constraint state)."""
    schema = SCHEMAS[0]
    body = dict(schema_body(schema, 1.0, 11), n=3, model="m")
    r = default_server.post("/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert sorted(c["index"] for c in choices) == [0, 1, 2]
    for c in choices:
        assert c["finish_reason"] == "stop", c
        jsonschema.validate(json.loads(c["message"]["content"]), schema, format_checker=FORMATS)
