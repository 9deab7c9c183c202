"""Prefill/decode disaggregation through the HTTP API of real `tandem serve` processes:
the proxy's three steps done by hand (P with do_remote_decode, then D with P's
kv_transfer_params), against one colocated engine. See docs/KV_TRANSFER.md."""
import json
import subprocess
import time

import pytest
import requests

from tandem_procs import Server, free_port


def kv_config(role, port=None, **extra):
    c = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "engine_id": "0",
         "kv_connector_extra_config": {"use_ascend_direct": True, "prefill": {"dp_size": 1, "tp_size": 1},
                                       "decode": {"dp_size": 1, "tp_size": 1}}}
    if port is not None:
        c["kv_port"] = str(port)
    c.update(extra)
    return json.dumps(c)


COMMON = ["--served-model-name", "fixture", "--enable-prompt-tokens-details", "--max-model-len", "512"]


@pytest.fixture(scope="module")
def cluster(tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pd")
    model = fixture_dir / "llama.gguf"
    kv_port = free_port()
    servers = {
        "colocated": Server(tandem_bin, model, COMMON, tmp, "colocated"),
        "p": Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_producer", kv_port)], tmp, "p"),
        "d": Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_consumer", 30100)], tmp, "d"),
    }
    servers["kv_port"] = kv_port
    yield servers
    for name in ("colocated", "p", "d"):
        assert servers[name].stop() == 0, servers[name].log()[-2000:]


def prefill(p, body):
    req = dict(body, stream=False, max_tokens=1,
               kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                                   "remote_block_ids": None, "remote_host": None, "remote_port": None})
    req.pop("stream_options", None)
    r = p.post("/v1/completions" if "prompt" in body else "/v1/chat/completions", req)
    assert r.status_code == 200, r.text
    return r.json()


def decode(d, body, params, stream=False):
    req = dict(body, kv_transfer_params=params)
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    if not stream:
        r = d.post(path, req)
        assert r.status_code == 200, r.text
        return r.json()
    r = d.post(path, dict(req, stream=True, stream_options={"include_usage": True}), stream=True)
    assert r.status_code == 200, r.text
    text, usage = "", None
    for line in r.iter_lines():
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for c in chunk.get("choices", []):
            text += c.get("text") or (c.get("delta") or {}).get("content") or ""
        usage = chunk.get("usage") or usage
    return {"text": text, "usage": usage}


def prompt_of_tokens(server, n):
    """A prompt that tokenizes to exactly n tokens (with BOS)."""
    words = " ".join(f"w{i}" for i in range(400))
    toks = server.post("/tokenize", {"prompt": words}).json()["tokens"]
    return server.post("/detokenize", {"tokens": toks[1:n]}).json()["prompt"]


def test_pd_equals_colocated(cluster):
    p, d, colo = cluster["p"], cluster["d"], cluster["colocated"]
    prompts = ["hello world", "a", "the quick brown fox jumps over the lazy dog " * 5]
    prompts += [prompt_of_tokens(colo, n) for n in (16, 32, 48, 7)]
    for i, prompt in enumerate(prompts):
        body = {"model": "fixture", "prompt": prompt, "max_tokens": 10, "temperature": 0, "ignore_eos": True}
        n_tokens = len(colo.post("/tokenize", {"prompt": prompt}).json()["tokens"])
        want = colo.post("/v1/completions", body).json()
        first = prefill(p, body)
        kv = first["kv_transfer_params"]
        assert kv["do_remote_prefill"] is True and kv["do_remote_decode"] is False
        assert kv["remote_host"] == "127.0.0.1" and kv["remote_port"] == cluster["kv_port"]
        assert kv["remote_block_size"] == 16 and kv["num_prompt_blocks"] == (n_tokens + 15) // 16
        assert len(kv["remote_block_ids"]) == kv["num_prompt_blocks"]
        assert isinstance(kv["last_token_id"], int) and kv["remote_request_id"]
        got = decode(d, body, kv, stream=(i % 2 == 1))
        got_text = got["choices"][0]["text"] if "choices" in got else got["text"]
        assert got_text == want["choices"][0]["text"], (prompt, n_tokens)
        assert got["usage"]["completion_tokens"] == 10
        # D reports its own prefix-cache figure, never the pulled tokens.
        assert got["usage"]["prompt_tokens_details"]["cached_tokens"] < n_tokens
    assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == len(prompts)
    # P and D share this host: every pull read P's shared-memory arena, none went over TCP.
    assert d.metric("tandem_kv_transfer_shm_pulls_total") == len(prompts)
    deadline = time.time() + 5
    while time.time() < deadline and p.metric("vllm:kv_cache_usage_perc") != 0:
        time.sleep(0.05)
    assert p.metric("vllm:kv_cache_usage_perc") == 0, "DONE freed the producer's blocks"


def test_pd_chat(cluster):
    p, d, colo = cluster["p"], cluster["d"], cluster["colocated"]
    body = {"model": "fixture", "messages": [{"role": "user", "content": "Tell me a story about a cat."}],
            "max_tokens": 8, "temperature": 0}
    want = colo.post("/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
    kv = prefill(p, body)["kv_transfer_params"]
    got = decode(d, body, kv)
    assert got["choices"][0]["message"]["content"] == want


def test_abort_frees_the_producer_and_decoder_recomputes(cluster):
    p, d, colo = cluster["p"], cluster["d"], cluster["colocated"]
    body = {"model": "fixture", "prompt": "abort me " * 20, "max_tokens": 6, "temperature": 0}
    kv = prefill(p, body)["kv_transfer_params"]
    assert p.metric("vllm:kv_cache_usage_perc") > 0
    r = p.post("/kv_transfer/abort", {"remote_request_id": kv["remote_request_id"]})
    assert r.status_code == 200 and r.json() == {"aborted": True}
    assert p.post("/kv_transfer/abort", {"remote_request_id": kv["remote_request_id"]}).json() == {"aborted": False}
    assert p.post("/kv_transfer/abort", {"nope": 1}).status_code == 400
    deadline = time.time() + 5
    while time.time() < deadline and p.metric("vllm:kv_cache_usage_perc") != 0:
        time.sleep(0.05)
    assert p.metric("vllm:kv_cache_usage_perc") == 0
    failed_before = d.metric("tandem_kv_transfer_pulls_total", result="failed")
    # The lease is gone: D's pull fails and, with the default policy, D recomputes.
    got = decode(d, body, kv)
    assert got["choices"][0]["text"] == colo.post("/v1/completions", body).json()["choices"][0]["text"]
    assert "recomputing the prompt" in d.log()
    assert d.metric("tandem_kv_transfer_pulls_total", result="failed") == failed_before + 1


def test_cache_salt_over_pd(cluster):
    """A salted prompt pulled from P is cached on D under the salt only."""
    p, d, colo = cluster["p"], cluster["d"], cluster["colocated"]
    body = {"model": "fixture", "prompt": "tenant prompt " + " ".join(f"t{i}" for i in range(50)), "max_tokens": 4,
            "temperature": 0, "ignore_eos": True, "cache_salt": "tenant-a"}
    kv = prefill(p, body)["kv_transfer_params"]
    got = decode(d, body, kv)
    assert got["choices"][0]["text"] == colo.post("/v1/completions", body).json()["choices"][0]["text"]

    def cached_on_d(**extra):
        r = d.post("/v1/completions", dict(body, **extra))
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    unsalted = {k: v for k, v in body.items() if k != "cache_salt"}
    r = d.post("/v1/completions", unsalted)
    assert r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert cached_on_d(cache_salt="tenant-b") == 0
    assert cached_on_d() > 0  # tenant-a's pulled blocks serve tenant-a


def test_bad_kv_transfer_config_is_exit_2(tandem_bin, fixture_dir):
    cases = [
        ('{"kv_connector": "NixlConnector", "kv_role": "kv_producer"}', "kv_transfer_config.kv_connector"),
        ('{"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": "x"}', "kv_transfer_config.kv_port"),
        ('{"kv_connector": "MooncakeConnectorV1", "kv_role": "master"}', "kv_transfer_config.kv_role"),
        ('{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [{"kv_connector": 1}]}}',
         "connectors[0].kv_connector"),
        ('{not json', "kv-transfer-config"),
    ]
    for config, needle in cases:
        r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--port", "0",
                            "--kv-transfer-config", config], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (config, r.stderr)
        assert needle in r.stderr, (config, r.stderr)
