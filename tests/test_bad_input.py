"""Malformed and hostile requests against an engine (`tandem serve`) and the PD entry point
(`tandem proxy` in front of a prefiller and a decoder), all with --api-key: each gets its
expected status with an OpenAI error body, and afterwards both still serve normally.
Real processes on 127.0.0.1."""
import json
import socket

import pytest
import requests

from tandem_procs import Server, free_port
from test_proxy import Proxy, addr, kv_config

KEY = "s3cret-key"
MODEL = "fixture"
ARGS = ["--served-model-name", MODEL, "--max-model-len", "256", "--api-key", KEY]


@pytest.fixture(scope="module")
def targets(tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    model = fixture_dir / "llama.gguf"
    procs = []
    try:
        engine = Server(tandem_bin, model, ARGS, tmp, "engine")
        procs.append(engine)
        p = Server(tandem_bin, model, ARGS + ["--kv-transfer-config", kv_config("kv_producer", "p")], tmp, "p")
        procs.append(p)
        d = Server(tandem_bin, model, ARGS + ["--kv-transfer-config", kv_config("kv_consumer", "d")], tmp, "d")
        procs.append(d)
        proxy = Proxy(tandem_bin, [addr(p)], [addr(d)], tmp, extra=["--api-key", KEY])
        procs.append(proxy)
        yield {"engine": engine.url, "proxy": proxy.url}
    finally:
        for proc in reversed(procs):
            proc.stop()


AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
OK_COMPLETION = {"model": MODEL, "prompt": "hello", "max_tokens": 2}
OK_CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def completion(**overrides):
    body = dict(OK_COMPLETION)
    for k, v in overrides.items():
        if v is DROP:
            body.pop(k, None)
        else:
            body[k] = v
    return json.dumps(body)


def chat(**overrides):
    body = dict(OK_CHAT)
    for k, v in overrides.items():
        if v is DROP:
            body.pop(k, None)
        else:
            body[k] = v
    return json.dumps(body)


DROP = object()
C, CH = "/v1/completions", "/v1/chat/completions"

# (name, method, path, headers, body, expected status)
CASES = [
    # Authentication.
    ("no auth header", "POST", C, {"Content-Type": "application/json"}, completion(), 401),
    ("wrong key", "POST", C, {"Authorization": "Bearer nope"}, completion(), 401),
    ("empty bearer", "POST", C, {"Authorization": "Bearer "}, completion(), 401),
    ("basic scheme", "POST", C, {"Authorization": "Basic czNjcmV0LWtleQ=="}, completion(), 401),
    ("key with a suffix", "POST", C, {"Authorization": f"Bearer {KEY}x"}, completion(), 401),
    # Bodies that are not a JSON object.
    ("broken json", "POST", C, AUTH, "{", 400),
    ("json array", "POST", C, AUTH, "[1, 2]", 400),
    ("json string", "POST", C, AUTH, '"prompt"', 400),
    ("json null", "POST", C, AUTH, "null", 400),
    ("empty body", "POST", C, AUTH, "", 400),
    ("invalid utf-8", "POST", C, AUTH, b'{"model": "fixture", "prompt": "\xff\xfe", "max_tokens": 2}', 400),
    ("NaN literal", "POST", C, AUTH, '{"model": "fixture", "prompt": "x", "temperature": NaN}', 400),
    ("deep nesting", "POST", C, AUTH, '{"prompt": ' + "[" * 5000 + "]" * 5000 + "}", 400),
    ("trailing garbage", "POST", C, AUTH, completion() + "xyz", 400),
    # Fields with wrong types or values.
    ("missing prompt", "POST", C, AUTH, completion(prompt=DROP), 400),
    ("prompt is a number", "POST", C, AUTH, completion(prompt=42), 400),
    ("prompt empty list", "POST", C, AUTH, completion(prompt=[]), 400),
    ("token id out of vocab", "POST", C, AUTH, completion(prompt=[1, 999999]), 400),
    ("negative token id", "POST", C, AUTH, completion(prompt=[1, -5]), 400),
    ("max_tokens negative", "POST", C, AUTH, completion(max_tokens=-1), 400),
    ("max_tokens zero", "POST", C, AUTH, completion(max_tokens=0), 400),
    ("max_tokens huge", "POST", C, AUTH, completion(max_tokens=10 ** 12), 400),
    ("max_tokens a string", "POST", C, AUTH, completion(max_tokens="5"), 400),
    ("temperature negative", "POST", C, AUTH, completion(temperature=-1), 400),
    ("temperature a string", "POST", C, AUTH, completion(temperature="hot"), 400),
    ("top_p zero", "POST", C, AUTH, completion(top_p=0), 400),
    ("top_p above one", "POST", C, AUTH, completion(top_p=1.5), 400),
    ("top_k below -1", "POST", C, AUTH, completion(top_k=-5), 400),
    ("logprobs above 20", "POST", C, AUTH, completion(logprobs=100), 400),
    ("stop not strings", "POST", C, AUTH, completion(stop=[1, 2]), 400),
    ("presence_penalty out of range", "POST", C, AUTH, completion(presence_penalty=5), 400),
    ("frequency_penalty out of range", "POST", C, AUTH, completion(frequency_penalty=-3), 400),
    ("repetition_penalty zero", "POST", C, AUTH, completion(repetition_penalty=0), 400),
    ("seed a string", "POST", C, AUTH, completion(seed="abc"), 400),
    ("stream a string", "POST", C, AUTH, completion(stream="yes"), 400),
    ("prompt beyond max-model-len", "POST", C, AUTH, completion(prompt=[1] * 400), 400),
    ("unknown model", "POST", C, AUTH, completion(model="gpt-9"), 404),
    ("unknown fields are accepted", "POST", C, AUTH, completion(frobnicate={"a": 1}), 200),
    # Chat.
    ("messages missing", "POST", CH, AUTH, chat(messages=DROP), 400),
    ("messages not a list", "POST", CH, AUTH, chat(messages="hi"), 400),
    ("messages empty", "POST", CH, AUTH, chat(messages=[]), 400),
    ("message without role", "POST", CH, AUTH, chat(messages=[{"content": "hi"}]), 400),
    ("message content a number", "POST", CH, AUTH, chat(messages=[{"role": "user", "content": 7}]), 400),
    ("tools malformed", "POST", CH, AUTH, chat(tools=[{"type": "function"}]), 400),
    ("logit_bias bad key", "POST", CH, AUTH, chat(logit_bias={"abc": 1}), 400),
    # Routes.
    ("unknown path", "POST", "/v1/nothing", AUTH, completion(), 404),
    ("wrong method", "GET", C, AUTH, None, (404, 405)),
]


def send_raw(url, data):
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        first = s.recv(4096)
    return int(first.split(b" ")[1]) if first else None


@pytest.mark.parametrize("target", ["engine", "proxy"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_request(targets, target, case):
    name, method, path, headers, body, want = case
    url = targets[target]
    r = requests.request(method, url + path, headers=headers, data=body, timeout=60)
    wanted = want if isinstance(want, tuple) else (want,)
    assert r.status_code in wanted, f"{target} {name}: {r.status_code} {r.text[:300]}"
    if r.status_code >= 400:
        error = r.json().get("error")
        assert isinstance(error, dict) and error.get("message"), r.text[:300]


@pytest.mark.parametrize("target", ["engine", "proxy"])
def test_oversized_body_and_headers(targets, target):
    url = targets[target]
    big = json.dumps(dict(OK_COMPLETION, prompt="x " * (20 << 20)))
    r = requests.post(url + C, headers=AUTH, data=big, timeout=60)
    assert r.status_code == 413, r.text[:200]
    status = send_raw(url, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (200 << 10) +
                      b"\r\nContent-Length: 2\r\n\r\n{}")
    assert status in (400, 431, None)


@pytest.mark.parametrize("target", ["engine", "proxy"])
def test_very_deep_nesting_is_refused(targets, target):
    # 2 million levels in 4 MB (under the body limits): the proxy re-serialized such a
    # body recursively and overflowed its stack (found by ASan on the 5,000-level case).
    # Depth is checked before parsing now: 512 levels pass, 513 do not.
    url = targets[target]
    deep = '{"model": "fixture", "prompt": "x", "max_tokens": 2, "x": ' + "[" * 2000000 + "]" * 2000000 + "}"
    r = requests.post(url + C, headers=AUTH, data=deep, timeout=60)
    assert r.status_code == 400, r.text[:200]
    assert "nested deeper than 512" in r.json()["error"]["message"]
    ok = '{"model": "fixture", "prompt": "x", "max_tokens": 2, "x": ' + "[" * 511 + "]" * 511 + "}"
    assert requests.post(url + C, headers=AUTH, data=ok, timeout=60).status_code == 200
    over = '{"model": "fixture", "prompt": "x", "max_tokens": 2, "x": ' + "[" * 512 + "]" * 512 + "}"
    assert requests.post(url + C, headers=AUTH, data=over, timeout=60).status_code == 400


def test_everything_still_serves_afterwards(targets):
    for target, url in targets.items():
        assert requests.get(url + "/health", headers=AUTH, timeout=10).status_code == 200, target
        r = requests.post(url + C, headers=AUTH, data=completion(ignore_eos=True), timeout=60)
        assert r.status_code == 200, (target, r.text)
        assert r.json()["usage"]["completion_tokens"] == 2
