"""Integration tests for the request surface of `tandem serve` (issue 21): parallel
sampling (n > 1), priority scheduling, bad input naming the field, and the /health
watchdog as the proxy sees it. Real processes on 127.0.0.1, stopped by pid."""
import json
import random
import threading
import time

import pytest
import requests

from tandem_procs import HttpProcess, Server

MODEL = "fixture"


@pytest.fixture(scope="module")
def fx(tandem_bin, fixture_dir, tmp_path_factory):
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--served-model-name", MODEL, "--max-model-len", "256", "--max-num-seqs", "8"],
                    tmp_path_factory.mktemp("surface"))
    yield server
    assert server.stop() == 0


def fresh_prompt(words=11):
    """A prompt no earlier request cached (the prefix cache would hide a second prefill)."""
    rng = random.Random(time.time_ns())
    return " ".join(rng.choice(["red", "fox", "blue", "sky", "tree", "moon", "sea", "cat"]) for _ in range(words))


def test_n_greedy_choices_are_identical_and_usage_sums(fx):
    r = fx.post("/v1/completions", {"model": MODEL, "prompt": "Hello there", "max_tokens": 6, "temperature": 0,
                                    "ignore_eos": True, "n": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert len({c["text"] for c in body["choices"]}) == 1
    assert all(c["finish_reason"] == "length" for c in body["choices"])
    one = fx.post("/v1/completions", {"model": MODEL, "prompt": "Hello there", "max_tokens": 6, "temperature": 0,
                                      "ignore_eos": True}).json()
    assert body["choices"][0]["text"] == one["choices"][0]["text"]
    assert body["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]  # counted once
    assert body["usage"]["completion_tokens"] == 3 * 6  # summed over the choices (as vLLM)
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 18


def test_n_prefills_the_prompt_once(fx):
    prompt = fresh_prompt()
    n_prompt = len(fx.post("/tokenize", {"prompt": prompt}).json()["tokens"])
    before = fx.metric("vllm:prompt_tokens_total") or 0.0
    r = fx.post("/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 3, "n": 4, "temperature": 0.8})
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"]) == 4
    assert fx.metric("vllm:prompt_tokens_total") - before == n_prompt


def test_n_seeded_choices_follow_seed_plus_index(fx):
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0, "seed": 77,
            "ignore_eos": True, "n": 2}
    a = fx.post("/v1/completions", body).json()
    b = fx.post("/v1/completions", body).json()
    assert [c["text"] for c in a["choices"]] == [c["text"] for c in b["choices"]]  # reproducible
    for i in range(2):  # vLLM's rule: choice i samples with seed + i
        alone = fx.post("/v1/completions", {**body, "n": 1, "seed": 77 + i}).json()
        assert a["choices"][i]["text"] == alone["choices"][0]["text"]
    unseeded = {**body}
    del unseeded["seed"]
    texts = [c["text"] for c in fx.post("/v1/completions", {**unseeded, "n": 6}).json()["choices"]]
    assert len(set(texts)) > 1, "without a seed each choice draws on its own"


def test_n_streaming_indices_and_usage(fx):
    body = {"model": MODEL, "prompt": "Hello", "max_tokens": 5, "temperature": 0, "ignore_eos": True, "n": 2,
            "stream": True, "stream_options": {"include_usage": True}}
    raw = fx.post("/v1/completions", body, stream=True)
    assert raw.status_code == 200
    events = [e[len("data: "):] for e in raw.content.decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = {0: "", 1: ""}
    finished = []
    for c in chunks[:-1]:
        for choice in c["choices"]:
            text[choice["index"]] += choice["text"]
            if choice["finish_reason"]:
                finished.append(choice["index"])
    assert sorted(finished) == [0, 1]
    assert text[0] == text[1] and text[0]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 10


def test_n_chat(fx):
    r = fx.post("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                                         "max_tokens": 4, "n": 2, "temperature": 0})
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    assert choices[0]["message"]["content"] == choices[1]["message"]["content"]
    raw = fx.post("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                                           "max_tokens": 3, "n": 2, "stream": True}, stream=True)
    chunks = [json.loads(e[6:]) for e in raw.content.decode().split("\n\n") if e and e != "data: [DONE]"]
    roles = [c["choices"][0]["index"] for c in chunks if c["choices"] and c["choices"][0]["delta"].get("role")]
    assert sorted(roles) == [0, 1], "each choice starts with its role chunk"


@pytest.mark.parametrize("body,field", [
    ({"n": 0}, "n must be at least 1"),
    ({"n": 9}, "n must be at most 8 (--max-num-seqs), got 9."),
    ({"n": "two"}, "n: Input should be a valid integer"),
    ({"priority": "high"}, "priority: Input should be a valid integer"),
    ({"priority": 2.5}, "priority: Input should be a valid integer"),
    ({"priority": 3}, "Got priority 3 but Priority scheduling is not enabled."),
    ({"n": 2, "kv_transfer_params": {"do_remote_decode": True}}, "n > 1 is not supported with kv_transfer_params"),
])
def test_bad_input_names_the_field(fx, body, field):
    for path, base in (("/v1/completions", {"prompt": "x"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        r = fx.post(path, {"model": MODEL, **base, **body})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert field in err["message"] and err["code"] == 400


def test_best_of(fx):
    """vLLM V1 refuses best_of > 1 (completions; chat has no best_of)."""
    r = fx.post("/v1/completions", {"model": MODEL, "prompt": "x", "best_of": 2, "n": 2})
    assert r.status_code == 400 and "best_of > 1 is not supported" in r.json()["error"]["message"]
    assert fx.post("/v1/completions", {"model": MODEL, "prompt": "x", "best_of": 1, "max_tokens": 1}).status_code == 200


def test_vllm_extra_fields(fx):
    base = {"model": MODEL, "prompt": "one two three four", "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    full = fx.post("/v1/completions", base).json()["choices"][0]["text"]
    stop = full[3:6]
    assert stop.strip(), full
    cut = fx.post("/v1/completions", {**base, "stop": [stop]}).json()["choices"][0]
    kept = fx.post("/v1/completions", {**base, "stop": [stop], "include_stop_str_in_output": True}).json()["choices"][0]
    assert cut["finish_reason"] == kept["finish_reason"] == "stop"
    assert kept["text"] == cut["text"] + stop and full.startswith(kept["text"])
    # request_id names the response unless X-Request-Id does (vLLM's order).
    assert fx.post("/v1/completions", {**base, "request_id": "mine"}).json()["id"] == "cmpl-mine"
    assert fx.post("/v1/completions", {**base, "request_id": "mine"},
                   headers={"X-Request-Id": "hdr"}).json()["id"] == "cmpl-hdr"
    # truncate_prompt_tokens keeps the last k prompt tokens.
    n_prompt = fx.post("/v1/completions", base).json()["usage"]["prompt_tokens"]
    assert n_prompt > 2
    r = fx.post("/v1/completions", {**base, "truncate_prompt_tokens": 2}).json()
    assert r["usage"]["prompt_tokens"] == 2
    r = fx.post("/v1/completions", {**base, "truncate_prompt_tokens": 999})
    assert r.status_code == 400 and "truncate_prompt_tokens" in r.json()["error"]["message"]


def test_fcfs_accepts_priority_zero(fx):
    r = fx.post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2, "priority": 0})
    assert r.status_code == 200, r.text


def test_high_priority_overtakes_the_queue(tandem_bin, fixture_dir, tmp_path):
    # One seat, and steps slowed so the queue is still there when the last request comes.
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--served-model-name", MODEL, "--max-model-len", "256", "--max-num-seqs", "1",
                     "--scheduling-policy", "priority"], tmp_path, env={"TANDEM_FAULT_ENGINE_STEP_DELAY_MS": "20"})
    try:
        order, lock = [], threading.Lock()

        def send(name, priority, max_tokens):
            r = server.post("/v1/completions", {"model": MODEL, "prompt": "tell me a story", "max_tokens": max_tokens,
                                                "ignore_eos": True, "priority": priority})
            assert r.status_code == 200, r.text
            with lock:
                order.append(name)

        threads = [threading.Thread(target=send, args=("running", 0, 60))]
        threads[0].start()
        deadline = time.time() + 10
        while (server.metric("vllm:num_requests_running") or 0) < 1 and time.time() < deadline:
            time.sleep(0.02)
        for i in range(3):
            threads.append(threading.Thread(target=send, args=(f"low{i}", 10, 5)))
            threads[-1].start()
        deadline = time.time() + 10
        while (server.metric("vllm:num_requests_waiting") or 0) < 3 and time.time() < deadline:
            time.sleep(0.02)
        assert server.metric("vllm:num_requests_waiting") == 3
        threads.append(threading.Thread(target=send, args=("high", -1, 5)))
        threads[-1].start()
        for t in threads:
            t.join(60)
        assert order[:2] == ["running", "high"], order
        assert sorted(order[2:]) == ["low0", "low1", "low2"]
    finally:
        server.stop()


class Proxy(HttpProcess):
    def __init__(self, tandem_bin, prefiller, decoder, tmp_path):
        self._args = ["--prefiller-hosts", "127.0.0.1", "--prefiller-ports", str(prefiller.port),
                      "--decoder-hosts", "127.0.0.1", "--decoder-ports", str(decoder.port),
                      "--health-check-interval", "0.2"]
        super().__init__([tandem_bin, "proxy"], tmp_path, "proxy", timeout=30)

    def command(self, cmd):
        return [*cmd, *self._args]


def test_health_watchdog_and_the_proxy(tandem_bin, fixture_dir, tmp_path):
    """A server whose steps take 3 s (fault hook) with a 0.5 s watchdog: /health is 200
    while idle, 503 with the reason while a request waits on the stuck loop, 200 again
    once idle; the proxy's periodic probe marks the instance down on the 503 and brings it
    back once it answers 200 (its own /health counts down instances too: its log says
    what it did)."""
    stuck = Server(tandem_bin, fixture_dir / "llama.gguf",
                   ["--served-model-name", MODEL, "--health-watchdog-s", "0.5"], tmp_path, name="stuck",
                   env={"TANDEM_FAULT_ENGINE_STEP_DELAY_MS": "3000"})
    ok = Server(tandem_bin, fixture_dir / "llama.gguf", ["--served-model-name", MODEL], tmp_path, name="ok")
    proxy = Proxy(tandem_bin, ok, stuck, tmp_path)
    stuck_addr = f"127.0.0.1:{stuck.port}"

    def wait_log(text, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline and text not in proxy.log():
            time.sleep(0.05)
        return text in proxy.log()

    try:
        assert requests.get(stuck.url + "/health", timeout=5).status_code == 200
        done = threading.Event()

        def slow():
            # One step (prefill and the only token): 503 from 0.5 s to 3 s into it.
            stuck.post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 1, "ignore_eos": True})
            done.set()

        threading.Thread(target=slow).start()
        seen = None
        deadline = time.time() + 5
        while time.time() < deadline and seen is None:
            r = requests.get(stuck.url + "/health", timeout=5)
            if r.status_code == 503:
                seen = r
            time.sleep(0.05)
        assert seen is not None, "/health never answered 503 while the loop was stuck"
        assert "has not completed a step" in seen.json()["error"]["message"]
        assert wait_log(f"instance {stuck_addr} answers /health with 503; marking it down"), proxy.log()
        assert done.wait(30)
        assert requests.get(stuck.url + "/health", timeout=5).status_code == 200
        assert wait_log(f"decode instance {stuck_addr} is up again"), proxy.log()
    finally:
        proxy.stop()
        ok.stop()
        stuck.stop()


def test_n_through_the_pd_proxy_is_a_400_naming_n(tandem_bin, fixture_dir, tmp_path):
    """PD with n > 1 is not supported: the prefiller refuses it (400 naming n) and the
    proxy hands the client that 400; n = 1 goes through."""
    from tandem_procs import free_port

    def engine(role, name):
        kv = json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(free_port()),
                         "engine_id": name})
        return Server(tandem_bin, fixture_dir / "llama.gguf",
                      ["--served-model-name", MODEL, "--kv-transfer-config", kv], tmp_path, name=name)

    p0 = engine("kv_producer", "p0")
    d0 = engine("kv_consumer", "d0")
    proxy = Proxy(tandem_bin, p0, d0, tmp_path)
    try:
        r = proxy.post("/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 3, "n": 2})
        assert r.status_code == 400, r.text
        assert "n > 1 is not supported with kv_transfer_params" in r.json()["error"]["message"]
        r = proxy.post("/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 3})
        assert r.status_code == 200, r.text
    finally:
        proxy.stop()
        d0.stop()
        p0.stop()
