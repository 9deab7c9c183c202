"""Integration tests for `tandem proxy`: real `tandem serve` processes as prefiller (P) and
decoders (D) on 127.0.0.1, the proxy in front, driven with the `openai` client, requests
and raw sockets. Processes are stopped by pid."""
import json
import re
import signal
import socket
import subprocess
import time

import openai
import pytest
import requests

from tandem_procs import HttpProcess, Server, free_port

MODEL_NAME = "fixture"
COMMON = ["--served-model-name", MODEL_NAME, "--enable-prompt-tokens-details", "--max-model-len", "256"]


def kv_config(role, engine_id):
    return json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role,
                       "kv_port": str(free_port()), "engine_id": engine_id})


def start_engine(tandem_bin, fixture_dir, tmp_path, role, name, extra=()):
    args = [*COMMON, "--kv-transfer-config", kv_config(role, name), *extra]
    return Server(tandem_bin, fixture_dir / "llama.gguf", args, tmp_path, name=name)


class Proxy(HttpProcess):
    """One `tandem proxy` process on 127.0.0.1."""

    def __init__(self, tandem_bin, prefillers, decoders, tmp_path, extra=(), name="proxy", port=None):
        self._args = ["--prefiller-hosts", *[h for h, _ in prefillers],
                      "--prefiller-ports", *[str(p) for _, p in prefillers],
                      "--decoder-hosts", *[h for h, _ in decoders],
                      "--decoder-ports", *[str(p) for _, p in decoders],
                      "--health-check-interval", "0.2", *extra]
        super().__init__([tandem_bin, "proxy"], tmp_path, name, timeout=30, port=port)

    def command(self, cmd):
        return [*cmd, *self._args]

    def health(self):
        return requests.get(self.url + "/health", headers=self.auth, timeout=10).json()

    def metrics(self):
        return requests.get(self.url + "/metrics", headers=self.auth, timeout=10).text


def addr(server):
    return ("127.0.0.1", server.port)


def running(server):
    return server.metric("vllm:num_requests_running") or 0.0


def wait_for(cond, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.fixture(scope="module")
def cluster(tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pd")
    procs = {}
    try:
        procs["ref"] = Server(tandem_bin, fixture_dir / "llama.gguf", COMMON, tmp, name="colocated")
        procs["p0"] = start_engine(tandem_bin, fixture_dir, tmp, "kv_producer", "p0")
        procs["d0"] = start_engine(tandem_bin, fixture_dir, tmp, "kv_consumer", "d0")
        procs["proxy"] = Proxy(tandem_bin, [addr(procs["p0"])], [addr(procs["d0"])], tmp)
        yield procs
    finally:
        for name in ("proxy", "d0", "p0", "ref"):
            if name in procs:
                procs[name].stop()


def prompt_with_tokens(server, n):
    """A prompt that tokenizes to exactly n tokens (BOS included), grown character by character."""
    source = "the quick brown fox jumps over a lazy dog while seven wizards quietly hum " * 40
    lo = 0
    for end in range(1, len(source)):
        text = source[:end]
        count = server.post("/tokenize", {"prompt": text}).json()["count"]
        if count == n and not text.endswith(" "):
            return text
        if count > n:
            break
        lo = end
    raise AssertionError(f"no prefix of the source text has exactly {n} tokens (stopped at {lo})")


PROMPTS = [
    "Hello there", "Once upon a time", "The capital of France is", "1, 2, 3, 4,", "def fib(n):",
    "A B C D E F G", "In the beginning", "Roses are red,", "The weather today", "SELECT * FROM",
    "import numpy as np", "Dear Sir or Madam,", "Q: What is 2+2?\nA:", "Lorem ipsum dolor sit amet",
    "Once there was a little", "The meaning of life is", "Translate to French: cat", "x",
    "Knock knock. Who's there?", "To be or not to be",
]


@pytest.mark.parametrize("stream", [False, True])
def test_greedy_outputs_equal_a_colocated_engine(cluster, stream):
    ref, proxy = cluster["ref"], cluster["proxy"]
    prompts = PROMPTS + [prompt_with_tokens(ref, 32), prompt_with_tokens(ref, 9)]
    assert ref.post("/tokenize", {"prompt": prompts[-2]}).json()["count"] % 16 == 0
    assert ref.post("/tokenize", {"prompt": prompts[-1]}).json()["count"] < 16
    for prompt in prompts:
        want = ref.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=8,
                                               temperature=0).choices[0].text
        if stream:
            chunks = proxy.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=8,
                                                       temperature=0, stream=True,
                                                       stream_options={"include_usage": True})
            got, usage = "", None
            for chunk in chunks:
                if chunk.choices:
                    got += chunk.choices[0].text
                if chunk.usage:
                    usage = chunk.usage
            assert usage is not None and usage.completion_tokens == 8
        else:
            r = proxy.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=8,
                                                  temperature=0)
            got = r.choices[0].text
            assert r.usage.completion_tokens == 8
        assert got == want, prompt


@pytest.mark.parametrize("stream", [False, True])
def test_chat_through_the_proxy_equals_colocated(cluster, stream):
    ref, proxy = cluster["ref"], cluster["proxy"]
    for content in ["hi", "Tell me a story", "What is 2+2?"]:
        messages = [{"role": "user", "content": content}]
        want = ref.client().chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=6,
                                                    temperature=0).choices[0].message.content
        if stream:
            got = "".join(c.choices[0].delta.content or "" for c in proxy.client().chat.completions.create(
                model=MODEL_NAME, messages=messages, max_tokens=6, temperature=0, stream=True) if c.choices)
        else:
            got = proxy.client().chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=6,
                                                         temperature=0).choices[0].message.content
        assert got == want


def test_cached_tokens_are_the_prefillers(cluster):
    p0, d0, proxy = cluster["p0"], cluster["d0"], cluster["proxy"]
    # A start no other test uses, so that no engine has any of its blocks cached yet.
    prompt = "Cached tokens probe: " + prompt_with_tokens(cluster["ref"], 40)
    # Warm the decoder's prefix cache only: it alone would now report cached tokens.
    warm = d0.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1, temperature=0)
    d_cached = d0.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1, temperature=0)
    assert warm.usage.prompt_tokens_details.cached_tokens == 0
    assert d_cached.usage.prompt_tokens_details.cached_tokens > 0
    r = proxy.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=2, temperature=0)
    assert r.usage.prompt_tokens_details.cached_tokens == 0  # P saw this prompt for the first time
    chunks = list(proxy.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=2,
                                                    temperature=0, stream=True,
                                                    stream_options={"include_usage": True}))
    usage = [c.usage for c in chunks if c.usage][-1]
    p_direct = p0.client().completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1, temperature=0)
    assert usage.prompt_tokens_details.cached_tokens == p_direct.usage.prompt_tokens_details.cached_tokens > 0


def test_health_models_and_instances(cluster):
    proxy, ref = cluster["proxy"], cluster["ref"]
    assert proxy.health() == {"status": "ok", "prefill_instances": 1, "decode_instances": 1, "request_num": 0}
    models = proxy.client().models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    r = proxy.post("/instances/add", {"type": "prefill", "instances": [f"127.0.0.1:{ref.port}"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert f"127.0.0.1:{ref.port}" in body["current_prefill_instances"]
    assert proxy.health()["prefill_instances"] == 2
    dead = f"127.0.0.1:{free_port()}"
    r = proxy.post("/instances/add", {"type": "decode", "instances": dead})
    assert r.json()["waiting"] == [dead]
    assert proxy.health()["decode_instances"] == 1
    assert proxy.post("/instances/add", {"type": "nope", "instances": ["a:1"]}).status_code == 400
    r = proxy.post("/instances/remove", {"type": "prefill", "instances": f"127.0.0.1:{ref.port}"})
    assert r.status_code == 200
    assert r.json()["current_prefill_instances"] == [f"127.0.0.1:{cluster['p0'].port}"]
    assert proxy.health()["prefill_instances"] == 1
    assert proxy.client().completions.create(model=MODEL_NAME, prompt="still", max_tokens=2).usage


def test_bad_json_is_a_400(cluster):
    proxy = cluster["proxy"]
    for body in ["{not json", "[1]"]:
        r = proxy.post("/v1/completions", body)
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "BadRequestError"
    # The engine's own validation comes back as is.
    r = proxy.post("/v1/completions", {"model": MODEL_NAME, "prompt": "x", "max_tokens": -3})
    assert r.status_code == 400 and "error" in r.json()


def test_metrics_are_prometheus(tandem_bin, cluster):
    proxy = cluster["proxy"]
    proxy.client().completions.create(model=MODEL_NAME, prompt="metrics", max_tokens=1)
    text = proxy.metrics()
    assert re.search(r'^tandem_proxy_requests_total\{outcome="success"\} [1-9]', text, re.M)
    assert "tandem_proxy_requests_in_flight 0" in text
    assert f'tandem_proxy_backend_up{{instance="127.0.0.1:{cluster["d0"].port}",role="decode"}} 1' in text
    # The engines' series come along, one `engine` label per backend (tandem watch reads them).
    for role, server in (("prefill", cluster["p0"]), ("decode", cluster["d0"])):
        assert re.search(r'^vllm:prefix_cache_queries_total\{engine="%s@127.0.0.1:%d",model_name="[^"]+"\} \d'
                         % (role, server.port), text, re.M), text
    assert text.count("# TYPE vllm:prefix_cache_queries counter") == 1
    watch = subprocess.run([tandem_bin, "watch", "-u", proxy.url, "-i", "0.2", "-n", "2"],
                           capture_output=True, text=True, timeout=30)
    assert watch.returncode == 0, watch.stderr
    assert f"prefill@127.0.0.1:{cluster['p0'].port}" in watch.stdout, watch.stdout
    assert f"decode@127.0.0.1:{cluster['d0'].port}" in watch.stdout, watch.stdout


def test_client_disconnect_mid_stream_releases_the_backends(cluster):
    proxy, d0, p0 = cluster["proxy"], cluster["d0"], cluster["p0"]
    body = json.dumps({"model": MODEL_NAME, "prompt": "Count forever:", "max_tokens": 200,
                       "ignore_eos": True, "stream": True})
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        got = b""
        while b"data:" not in got:
            data = s.recv(4096)
            assert data, "proxy closed before streaming"
            got += data
        assert running(d0) == 1.0
    # The client is gone: the decoder stops generating within 5 s.
    assert wait_for(lambda: running(d0) == 0.0 and running(p0) == 0.0, 5.0)
    # Nothing stays pinned: the decoder's blocks and the prefiller's kept ones are free.
    assert wait_for(lambda: d0.metric("vllm:kv_cache_usage_perc") == 0.0
                    and p0.metric("vllm:kv_cache_usage_perc") == 0.0, 5.0)
    assert wait_for(lambda: proxy.health()["request_num"] == 0, 5.0)
    assert re.search(r'^tandem_proxy_requests_total\{outcome="cancelled"\} [1-9]', proxy.metrics(), re.M)


def test_unreachable_prefiller_is_retried_on_another(tandem_bin, cluster, tmp_path):
    dead = ("127.0.0.1", free_port())
    proxy = Proxy(tandem_bin, [dead, addr(cluster["p0"])], [addr(cluster["d0"])], tmp_path,
                  extra=["--max-retries", "3", "--retry-delay", "0.01"])
    try:
        want = cluster["ref"].client().completions.create(model=MODEL_NAME, prompt="retry me", max_tokens=6,
                                                          temperature=0).choices[0].text
        for _ in range(3):
            got = proxy.client().completions.create(model=MODEL_NAME, prompt="retry me", max_tokens=6,
                                                    temperature=0).choices[0].text
            assert got == want
        text = proxy.metrics()
        assert f'tandem_proxy_backend_up{{instance="127.0.0.1:{dead[1]}",role="prefill"}} 0' in text
        assert re.search(r'^tandem_proxy_retries_total\{role="prefill"\} 1', text, re.M)
    finally:
        proxy.stop()


def test_decoder_killed_mid_request(tandem_bin, fixture_dir, cluster, tmp_path):
    victim = start_engine(tandem_bin, fixture_dir, tmp_path, "kv_consumer", "d-victim")
    proxy = Proxy(tandem_bin, [addr(cluster["p0"])], [addr(victim), addr(cluster["d0"])], tmp_path)
    try:
        # A fresh proxy sends its first request to the first decoder: the victim.
        body = {"model": MODEL_NAME, "prompt": "Count forever:", "max_tokens": 220, "ignore_eos": True,
                "stream": True}
        with requests.post(proxy.url + "/v1/completions", json=body, stream=True, timeout=60) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            first = next(line for line in lines if line.startswith(b"data:"))
            assert b"choices" in first
            assert running(victim) == 1.0
            victim.proc.send_signal(signal.SIGKILL)
            rest = [line for line in lines if line.startswith(b"data:")]
        # A terminal error event, then [DONE]: never a silent truncation.
        assert rest[-1] == b"data: [DONE]"
        assert b'"error"' in rest[-2], rest[-3:]
        # Later requests go to the other decoder and succeed.
        want = cluster["ref"].client().completions.create(model=MODEL_NAME, prompt="after the crash",
                                                          max_tokens=6, temperature=0).choices[0].text
        for stream in (False, True, False):
            if stream:
                got = "".join(c.choices[0].text for c in proxy.client().completions.create(
                    model=MODEL_NAME, prompt="after the crash", max_tokens=6, temperature=0, stream=True)
                    if c.choices)
            else:
                got = proxy.client().completions.create(model=MODEL_NAME, prompt="after the crash", max_tokens=6,
                                                        temperature=0).choices[0].text
            assert got == want
        assert f'tandem_proxy_backend_up{{instance="127.0.0.1:{victim.port}",role="decode"}} 0' in proxy.metrics()
    finally:
        proxy.stop()
        victim.stop()


def test_api_key_is_enforced_and_forwarded(tandem_bin, fixture_dir, tmp_path):
    # Keyed engines: they only answer when the proxy forwards the key. (Two processes: one
    # engine as both P and D would see the same X-Request-Id twice.)
    prefiller = start_engine(tandem_bin, fixture_dir, tmp_path, "kv_producer", "keyed-p", ["--api-key", "k3y"])
    decoder = start_engine(tandem_bin, fixture_dir, tmp_path, "kv_consumer", "keyed-d", ["--api-key", "k3y"])
    proxy = Proxy(tandem_bin, [addr(prefiller)], [addr(decoder)], tmp_path, extra=["--api-key", "k3y"])
    try:
        with pytest.raises(openai.AuthenticationError):
            proxy.client(api_key="wrong").completions.create(model=MODEL_NAME, prompt="x", max_tokens=2)
        assert proxy.post("/v1/completions", {"prompt": "x"}).status_code == 401
        r = proxy.client(api_key="k3y").completions.create(model=MODEL_NAME, prompt="x", max_tokens=2,
                                                           extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 2
        assert [m.id for m in proxy.client(api_key="k3y").models.list().data] == [MODEL_NAME]
        assert requests.get(proxy.url + "/health", timeout=10).status_code == 401
        assert requests.get(proxy.url + "/health", headers=proxy.auth, timeout=10).status_code == 200
    finally:
        proxy.stop()
        decoder.stop()
        prefiller.stop()


def test_seed_command_lines_run_as_written(tandem_bin, tmp_path):
    # The seeds' proxy.sh layouts: hosts and ports as lists, several values per line.
    port = free_port()
    cmd = [tandem_bin, "proxy", "--port", str(port), "--host", "127.0.0.1",
           "--prefiller-hosts", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2",
           "--prefiller-ports", "9081", "9082", "9081", "9082",
           "--decoder-hosts", *["127.0.0.3"] * 16, *["127.0.0.4"] * 16,
           "--decoder-ports", *[str(p) for p in range(9900, 9916)] * 2]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: _health_or_none(port) is not None, 10)
        assert _health_or_none(port) == {"status": "ok", "prefill_instances": 4, "decode_instances": 32,
                                         "request_num": 0}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def _health_or_none(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=1).json()
    except requests.RequestException:
        return None


@pytest.mark.parametrize("args,needle", [
    (["--prefiller-hosts", "a", "b", "--prefiller-ports", "1"], "prefiller hosts"),
    (["--decoder-ports", "0"], "--decoder-ports"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--max-retries", "x"], "--max-retries"),
])
def test_bad_flags_exit_2(tandem_bin, args, needle):
    r = subprocess.run([tandem_bin, "proxy", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert needle in r.stderr


def test_decoder_out_of_blocks_hands_back_and_the_proxy_recomputes(tandem_bin, fixture_dir, tmp_path):
    """vLLM-Ascend's recompute scheduler with real engines: a decoder whose KV cache is
    too small for its batch hands preempted requests back (stop_reason "recomputed") and
    the proxy finishes them through the prefiller; every client gets its whole answer."""
    procs = []  # stopped in `finally`, also when a later one fails to start
    try:
        p = start_engine(tandem_bin, fixture_dir, tmp_path, "kv_producer", "p_rc")
        procs.append(p)
        # At most 24 blocks of 16 tokens (8 KiB each for this fixture): six requests of
        # ~120 tokens need 48, so the decoder must preempt.
        d = start_engine(tandem_bin, fixture_dir, tmp_path, "kv_consumer", "d_rc",
                         extra=["--kv-cache-memory", str(24 * 8192),
                                "--additional-config", '{"recompute_scheduler_enable": true, "enable_mlapo": true}'])
        procs.append(d)
        proxy = Proxy(tandem_bin, [addr(p)], [addr(d)], tmp_path, name="proxy_rc")
        procs.append(proxy)
        blocks = re.search(r"KV cache: f16, (\d+) blocks of 16 tokens", d.log())
        assert blocks and int(blocks.group(1)) <= 24, d.log()
        assert "--additional-config keys (Ascend-only) enable_mlapo" in d.log()
        import concurrent.futures
        bodies = [{"model": MODEL_NAME, "prompt": f"{PROMPTS[i]} and so on", "max_tokens": 100,
                   "temperature": 0, "ignore_eos": True} for i in range(6)]
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda b: proxy.post("/v1/completions", b), bodies))
        for r in answers:
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            assert choice["finish_reason"] == "length", choice
            assert choice["stop_reason"] != "recomputed"
            assert choice["text"]
        assert "handing it back to be recomputed elsewhere" in d.log()
        assert re.search(r'^tandem_proxy_recomputes_total [1-9]', proxy.metrics(), re.M), proxy.metrics()
        assert wait_for(lambda: d.metric("vllm:kv_cache_usage_perc") == 0.0, 5.0)
    finally:
        for proc in reversed(procs):
            proc.stop()


def test_client_disconnect_while_prefilling_aborts_the_prefiller(tandem_bin, default_model, tmp_path):
    """The client leaves while the prefiller is still computing the prompt: the proxy
    drops its call, the prefiller aborts at once (no lease is kept for a decoder that
    will never come). Fails if the proxy does not cancel the prefill call."""
    procs = []  # stopped in `finally`, also when a later one fails to start
    try:
        p = Server(tandem_bin, default_model,
                   ["--served-model-name", MODEL_NAME, "--max-num-batched-tokens", "32", "--threads", "1",
                    "--kv-transfer-config", kv_config("kv_producer", "p_dc")], tmp_path, name="p_dc")
        procs.append(p)
        d = Server(tandem_bin, default_model,
                   ["--served-model-name", MODEL_NAME, "--threads", "1",
                    "--kv-transfer-config", kv_config("kv_consumer", "d_dc")], tmp_path, name="d_dc")
        procs.append(d)
        proxy = Proxy(tandem_bin, [addr(p)], [addr(d)], tmp_path, name="proxy_dc")
        procs.append(proxy)
        # ~1500 prompt tokens in chunks of 32: seconds of prefill on one thread.
        prompt = "the quick brown fox jumps over the lazy dog " * 160
        body = json.dumps({"model": MODEL_NAME, "prompt": prompt, "max_tokens": 8, "stream": True})
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
            assert wait_for(lambda: running(p) == 1.0, 10.0), "the prefiller never started"
        left = time.time()
        # Well before the prefill could have finished, the prefiller is idle again.
        assert wait_for(lambda: running(p) == 0.0, 5.0)
        assert time.time() - left < 1.5, "the prefiller went on computing the prompt"
        assert wait_for(lambda: "finished: reason=abort" in p.log(), 5.0), p.log()[-2000:]
        assert "finished: reason=length" not in p.log()
        assert p.metric("tandem_kv_transfer_leases") in (None, 0.0)
        assert running(d) == 0.0
    finally:
        for proc in reversed(procs):
            proc.stop()
