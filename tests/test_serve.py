"""Integration tests for `tandem serve`: a real server process driven over HTTP with the
`openai` client, raw HTTP (requests) and raw sockets."""
import json
import os
import re
import resource
import selectors
import socket
import subprocess
import threading
import time

import openai
import pytest
import requests

from tandem_procs import Server

SEED_FLAGS = [
    "--data-parallel-size", "1", "--data-parallel-rank", "0", "--data-parallel-address", "127.0.0.1",
    "--data-parallel-rpc-port", "13389", "--tensor-parallel-size", "1", "--enable-expert-parallel",
    "--enable-chunked-prefill", "--enable-prefix-caching", "--seed", "1024", "--max-num-batched-tokens", "4096",
    "--trust-remote-code", "--max-num-seqs", "48", "--gpu-memory-utilization", "0.92", "--quantization", "ascend",
    "--async-scheduling", "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
    "--reasoning-parser", "glm45", "--enable-prompt-tokens-details", "--safetensors-load-strategy", "prefetch",
    "--api-server-count", "1", "--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}',
    "--additional-config", '{"enable_dsa_cp": true}',
    "--speculative-config", '{"num_speculative_tokens": 3, "method": "deepseek_mtp", "enforce_eager": true}',
    "--kv-transfer-config", '{"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer"}',
    "--pipeline-parallel-size", "1", "--prefill-context-parallel-size", "1", "--decode-context-parallel-size", "1",
    "--cp-kv-cache-interleave-size", "128", "--data-parallel-size-local", "1", "--data-parallel-start-rank", "0",
]


@pytest.fixture(scope="module")
def fx(tandem_bin, fixture_dir, tmp_path_factory):
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--served-model-name", "fixture", "--enable-prompt-tokens-details", "--max-model-len", "256"],
                    tmp_path_factory.mktemp("fx"))
    yield server
    assert server.stop() == 0, "graceful shutdown on SIGTERM"


@pytest.fixture(scope="module")
def gemma(tandem_bin, default_model, tmp_path_factory):
    server = Server(tandem_bin, default_model, ["--max-model-len", "4096"], tmp_path_factory.mktemp("gemma"))
    yield server
    server.stop()


def test_a_prompt_at_the_full_max_model_len_is_served(fx):
    # 255 prompt tokens + 1 generated = --max-model-len 256: served, not refused, no hang.
    r = fx.post("/v1/completions", {"model": "fixture", "prompt": [5 + i % 50 for i in range(255)], "max_tokens": 1,
                                    "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["usage"]["prompt_tokens"] == 255 and body["usage"]["completion_tokens"] == 1
    assert body["choices"][0]["finish_reason"] == "length"
    over = fx.post("/v1/completions", {"model": "fixture", "prompt": [5] * 256, "max_tokens": 1})
    assert over.status_code == 400 and "maximum context length is 256 tokens" in over.text


def test_completion(fx):
    r = fx.client().completions.create(model="fixture", prompt="Hello there", max_tokens=5, temperature=0)
    assert r.id.startswith("cmpl-") and r.object == "text_completion" and r.model == "fixture"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5 and r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + 5
    again = fx.client().completions.create(model="fixture", prompt="Hello there", max_tokens=5, temperature=0)
    assert again.choices[0].text == r.choices[0].text  # greedy is deterministic


def test_completion_token_prompt_seed_stop_and_logprobs(fx):
    c = fx.client()
    r = c.completions.create(model="fixture", prompt=[5, 6, 7], max_tokens=4, temperature=0.8, seed=3, logprobs=2)
    assert r.usage.prompt_tokens == 3
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    r2 = c.completions.create(model="fixture", prompt=[5, 6, 7], max_tokens=4, temperature=0.8, seed=3, logprobs=2)
    assert r2.choices[0].text == r.choices[0].text  # same seed, same tokens
    full = c.completions.create(model="fixture", prompt="abc", max_tokens=12, temperature=0,
                                extra_body={"ignore_eos": True})
    text = full.choices[0].text
    if len(text) > 3:
        stop = text[2:4]
        cut = c.completions.create(model="fixture", prompt="abc", max_tokens=12, temperature=0, stop=[stop],
                                   extra_body={"ignore_eos": True})
        assert cut.choices[0].finish_reason == "stop"
        assert stop not in cut.choices[0].text
        assert cut.choices[0].model_extra.get("stop_reason") == stop


def test_chat(fx):
    r = fx.client().chat.completions.create(model="fixture", messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("length", "stop")
    assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 for t in r.choices[0].logprobs.content)


def test_streaming_completion_and_chat(fx):
    c = fx.client()
    chunks = list(c.completions.create(model="fixture", prompt="Once", max_tokens=6, temperature=0, stream=True,
                                       stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == 6 and chunks[-1].choices == []
    assert chunks[-2].choices[0].finish_reason == "length"
    plain = c.completions.create(model="fixture", prompt="Once", max_tokens=6, temperature=0)
    assert "".join(ch.choices[0].text for ch in chunks[:-1]) == plain.choices[0].text

    chat = list(c.chat.completions.create(model="fixture", messages=[{"role": "user", "content": "hey"}],
                                          max_tokens=5, temperature=0, stream=True,
                                          stream_options={"include_usage": True}))
    assert chat[0].choices[0].delta.role == "assistant"
    assert chat[-1].usage.completion_tokens == 5
    assert chat[-2].choices[0].finish_reason == "length"
    # Raw SSE framing: data lines, blank-line separated, ending with [DONE].
    raw = fx.post("/v1/completions", {"prompt": "x", "max_tokens": 3, "stream": True}, stream=True)
    assert raw.headers["content-type"].startswith("text/event-stream")
    body = raw.content.decode()
    events = [e for e in body.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"


@pytest.mark.parametrize("path,body,status,needle", [
    ("/v1/completions", "{not json", 400, "JSON"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, 400, "temperature must be non-negative"),
    ("/v1/completions", {"prompt": "x", "top_p": 1.5}, 400, "top_p must be in (0, 1]"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens must be at least 1"),
    ("/v1/completions", {"prompt": "x", "logprobs": 21}, 400, "max allowed: 20"),
    ("/v1/completions", {"prompt": "x", "n": 100000}, 400, "n must be at most"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 300}, 400, "maximum context length is 256 tokens"),
    ("/v1/completions", {"prompt": "word " * 400}, 400, "maximum context length is 256 tokens"),
    ("/v1/completions", {"prompt": ""}, 400, "non-empty"),
    ("/v1/completions", {"prompt": "x", "echo": True}, 400, "echo"),
    ("/v1/completions", {"prompt": [99999]}, 400, "out of vocabulary"),
    ("/v1/chat/completions", {"messages": []}, 400, "at least one message"),
    ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("/v1/completions", {"model": "nope", "prompt": "x"}, 404, "The model `nope` does not exist."),
    ("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "nope"),
    ("/v1/nothing", {}, 404, ""),
])
def test_errors(fx, path, body, status, needle):
    r = fx.post(path, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle in err["message"]
    assert err["code"] == status and err["type"]


def test_error_via_openai_client(fx):
    with pytest.raises(openai.BadRequestError):
        fx.client().completions.create(model="fixture", prompt="x", max_tokens=1000)
    with pytest.raises(openai.NotFoundError):
        fx.client().completions.create(model="other", prompt="x")


def test_oversized_body_is_413(fx):
    with socket.create_connection(("127.0.0.1", fx.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000000\r\n\r\n{")
        head = s.recv(4096).decode(errors="replace")
    assert head.startswith("HTTP/1.1 413"), head


def test_unknown_fields_accepted_and_kv_transfer_params(fx):
    r = fx.post("/v1/completions", {"prompt": "x", "max_tokens": 2, "some_new_field": 1, "user": "u",
                                    "kv_transfer_params": {"do_remote_decode": True}})
    assert r.status_code == 200, r.text
    assert "kv_transfer_params" in r.json()


def test_request_id_header(fx):
    r = fx.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert r.json()["id"].startswith("cmpl-")
    r = requests.post(fx.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2},
                      headers={"X-Request-Id": "my-id-1"}, timeout=30)
    assert r.json()["id"] == "cmpl-my-id-1"


def test_models_health_version(fx):
    models = fx.client().models.list()
    assert [m.id for m in models.data] == ["fixture"]
    assert models.data[0].model_extra["max_model_len"] == 256
    h = requests.get(fx.url + "/health", timeout=10)
    assert h.status_code == 200 and h.content == b""
    assert "version" in requests.get(fx.url + "/version", timeout=10).json()


def test_cache_salt_isolates_the_prefix_cache(fx):
    """Only requests with the same cache_salt share cached blocks (vLLM's per-tenant salt)."""
    prompt = "salted " + " ".join(f"s{i}" for i in range(60))

    def cached(**extra):
        r = fx.post("/v1/completions", {"model": "fixture", "prompt": prompt, "max_tokens": 1, **extra})
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached(cache_salt="tenant-a") == 0
    assert cached(cache_salt="tenant-a") > 0      # same tenant: hit
    assert cached(cache_salt="tenant-b") == 0     # another tenant: no hit on a's blocks
    assert cached() == 0                          # no salt: the shared cache has none of them
    assert cached() > 0
    assert cached(cache_salt="tenant-c") == 0     # ... and a salted request none of the shared ones
    r = fx.post("/v1/completions", {"model": "fixture", "prompt": "x", "cache_salt": ""})
    assert r.status_code == 400 and "cache_salt" in r.json()["error"]["message"]


def test_tokenize_detokenize(fx):
    t = fx.post("/tokenize", {"prompt": "hello world"}).json()
    assert t["count"] == len(t["tokens"]) > 0 and t["max_model_len"] == 256
    d = fx.post("/detokenize", {"tokens": t["tokens"]}).json()
    assert "hello world" in d["prompt"]
    chat = fx.post("/tokenize", {"messages": [{"role": "user", "content": "hi"}]}).json()
    assert chat["count"] > t["count"] - 2
    assert fx.post("/detokenize", {"tokens": [10 ** 7]}).status_code == 400


def test_metrics_names(fx):
    fx.client().completions.create(model="fixture", prompt="metrics", max_tokens=2)
    text = requests.get(fx.url + "/metrics", timeout=10).text
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:prefix_cache_queries",
                 "vllm:prefix_cache_hits", "vllm:request_success", "vllm:time_to_first_token_seconds",
                 "vllm:e2e_request_latency_seconds"]:
        assert name in text, name
    assert 'model_name="fixture"' in text


def test_cached_tokens_on_repeated_prompt(fx):
    prompt = " ".join(f"w{i}" for i in range(60))
    first = fx.client().completions.create(model="fixture", prompt=prompt, max_tokens=2)
    assert first.usage.prompt_tokens > 32
    second = fx.client().completions.create(model="fixture", prompt=prompt, max_tokens=2)
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    assert second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens
    log = fx.log()
    assert "num_computed_tokens=" in log


def test_api_key(tandem_bin, fixture_dir, tmp_path):
    server = Server(tandem_bin, fixture_dir / "llama.gguf", ["--api-key", "sekret"], tmp_path, "auth")
    try:
        with pytest.raises(openai.AuthenticationError):
            server.client("wrong").models.list()
        assert requests.get(server.url + "/v1/models", timeout=10).status_code == 401
        assert server.client("sekret").completions.create(model=str(fixture_dir / "llama.gguf"), prompt="x",
                                                          max_tokens=1).usage.completion_tokens == 1
        # /health and /metrics need the key too (--no-auth-health-metrics opens them).
        assert requests.get(server.url + "/health", timeout=10).status_code == 401
        assert requests.get(server.url + "/metrics", headers=server.auth, timeout=10).status_code == 200
    finally:
        assert server.stop() == 0


def test_queue_full_is_503(tandem_bin, fixture_dir, tmp_path):
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--max-num-seqs", "1", "--max-waiting-requests", "1"], tmp_path, "queue")
    try:
        results = []

        def one():
            r = server.post("/v1/completions", {"prompt": "x", "max_tokens": 200, "ignore_eos": True})
            results.append(r.status_code)

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 503 in results and 200 in results, results
        assert set(results) <= {200, 503}
    finally:
        server.stop()


def _stream_request(port, body):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def test_256_concurrent_streams(fx):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    n = 256
    socks = [_stream_request(fx.port, {"prompt": f"stream {i}", "max_tokens": 80, "ignore_eos": True,
                                       "stream": True}) for i in range(n)]
    # The server holds every connection open at once (each stream runs for 80 tokens).
    deadline = time.time() + 10
    server_fds = 0
    while time.time() < deadline and server_fds < n:
        server_fds = max(server_fds, len(os.listdir(f"/proc/{fx.proc.pid}/fd")))
        time.sleep(0.05)
    assert server_fds >= n, server_fds
    sel = selectors.DefaultSelector()
    bufs = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    open_socks = set(socks)
    deadline = time.time() + 120
    while open_socks and time.time() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            chunk = s.recv(65536)
            if chunk:
                bufs[s] += chunk
            if not chunk or b"data: [DONE]" in bufs[s]:
                sel.unregister(s)
                open_socks.discard(s)
    for s in socks:
        s.close()
    assert not open_socks, f"{len(open_socks)} streams unfinished"
    for s, b in bufs.items():
        assert b.startswith(b"HTTP/1.1 200"), b[:200]
        # One chunk per step with new text (a token ending mid-character waits for the next).
        assert b.count(b'"text_completion"') >= 20
        assert b'"finish_reason":"length"' in b


def test_disconnect_aborts_and_frees_kv(gemma):
    s = _stream_request(gemma.port, {"prompt": "Tell me a long story.", "max_tokens": 3000, "ignore_eos": True,
                                     "stream": True})
    got = b""
    while got.count(b"data: ") < 3:
        got += s.recv(65536)
    assert gemma.metric("vllm:kv_cache_usage_perc") > 0
    s.close()
    deadline = time.time() + 5
    while time.time() < deadline and gemma.metric("vllm:kv_cache_usage_perc") != 0:
        time.sleep(0.1)
    assert gemma.metric("vllm:kv_cache_usage_perc") == 0
    assert gemma.metric("vllm:num_requests_running") == 0
    assert "finish_reason=abort" in gemma.log()


def test_default_model_chat_template(gemma):
    assert "built-in 'gemma' template" in gemma.log()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    t = gemma.post("/tokenize", {"messages": msgs}).json()
    text = gemma.post("/detokenize", {"tokens": t["tokens"]}).json()["prompt"]
    assert text == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    r = gemma.client().chat.completions.create(model=gemma.client().models.list().data[0].id, messages=msgs,
                                               max_tokens=8, temperature=0)
    assert r.usage.prompt_tokens == t["count"]
    assert r.choices[0].message.content
    bad = gemma.post("/v1/chat/completions", {"messages": [{"role": "assistant", "content": "x"}]})
    assert bad.status_code == 400 and "alternate" in bad.json()["error"]["message"]


def test_cli_flags(tandem_bin, fixture_dir, tmp_path):
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--no-such-flag"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--no-such-flag" in r.stderr
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--kv-transfer-config", "{bad"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--kv-transfer-config" in r.stderr
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--kv-cache-memory", "lots"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--kv-cache-memory" in r.stderr
    # A GLM-shaped fixture: the deployment's MTP speculation (docs/DEPLOY.md) needs the model's NextN layers.
    server = Server(tandem_bin, fixture_dir / "glm4moe-q4_k_m.gguf", ["--served-model-name", "glm5", *SEED_FLAGS],
                    tmp_path, "seedflags")
    try:
        log = server.log()
        assert log.count("ignored on CPU") == 1 and "--quantization ascend" in log
        assert re.search(r"KV cache: \d+ blocks, max \d+ tokens fit", log)
        r = server.client().completions.create(model="glm5", prompt="x", max_tokens=2)
        assert r.usage.prompt_tokens_details is not None
    finally:
        assert server.stop() == 0


def test_logit_bias_steers_and_is_validated(fx):
    tok = fx.post("/tokenize", {"prompt": " hello"}).json()["tokens"][-1]
    r = fx.post("/v1/completions", {"model": "fixture", "prompt": "a b c", "max_tokens": 3, "temperature": 0,
                                    "logit_bias": {str(tok): 100}})
    assert r.status_code == 200, r.text
    want = fx.post("/detokenize", {"tokens": [tok] * 3}).json()["prompt"]
    assert r.json()["choices"][0]["text"] == want
    for bias in ({"x": 1}, {"5": 101}, {"5": "1"}, [5], {str(10 ** 9): 1}):
        r = fx.post("/v1/completions", {"model": "fixture", "prompt": "a", "max_tokens": 1, "logit_bias": bias})
        assert r.status_code == 400, (bias, r.text)
