"""Integration tests for cache-aware routing in `tandem proxy` (--worker-urls,
--routing-policy prefix_aware, --kv-events-endpoints): two real `tandem serve` workers
behind the proxy. The KV events come from a Python publisher (pyzmq + msgpack, vLLM's
encoding) that plays each worker's publisher, so the test decides what the proxy
believes each worker holds and checks where requests go; the workers' own counters say
which one served."""
import json
import re
import subprocess
import time

import msgpack
import pytest
import requests
import zmq

from tandem_procs import HttpProcess, Server, free_port

MODEL_NAME = "fixture"
BLOCK = 16
PROMPT = ("Once upon a time in a small village by the sea there lived an old fisherman who "
          "told long stories about the storms he had seen and the fish he had caught. ") * 3


class Publisher:
    """A KV-event publisher with vLLM's wire format: [topic, seq (8 bytes BE), payload]."""

    def __init__(self, ctx, topic=b"kv-events"):
        self.sock = ctx.socket(zmq.PUB)
        self.port = free_port()
        self.sock.bind(f"tcp://127.0.0.1:{self.port}")
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.topic = topic
        self.seq = 0

    def send(self, events, seq=None):
        self.seq = self.seq if seq is None else seq
        payload = msgpack.packb([time.time(), events, None], use_bin_type=True)
        self.sock.send_multipart([self.topic, self.seq.to_bytes(8, "big"), payload])
        self.seq += 1


def stored_events(tokens):
    """BlockStored for every whole block of `tokens`, chained (made-up 16-byte hashes)."""
    n = len(tokens) // BLOCK
    hashes = [bytes([i + 1]) * 16 for i in range(n)]
    return [["BlockStored", hashes, None, tokens[:n * BLOCK], BLOCK, None, "GPU"]], hashes


class Proxy(HttpProcess):
    def __init__(self, tandem_bin, workers, endpoints, tmp_path, extra=(), instances=None):
        """`workers` behind --worker-urls, or `instances` (PD flags) when given."""
        routed = instances if instances is not None else ["--worker-urls", *[w.url for w in workers]]
        self._args = [*routed, "--kv-events-endpoints", *endpoints, "--kv-events-topic", "kv-events",
                      "--health-check-interval", "0.2", *extra]
        super().__init__([tandem_bin, "proxy"], tmp_path, "proxy", timeout=30)

    def command(self, cmd):
        return [*cmd, *self._args]

    def value(self, name, **labels):
        """Sum of the series of `name` whose labels include `labels`."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        total = 0.0
        for m in re.finditer(r"^" + re.escape(name) + r"(?:\{([^}]*)\})? (\S+)$", text, re.M):
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
        return total


def join(pub, events, proxy, blocks):
    """Publishes `events` as seq 0 until the proxy has indexed `blocks` blocks (PUB drops
    messages until the subscriber has joined), then lets the repeats drain: each repeat
    that arrives reads as a restart (the sequence went back) and counts as a drop."""
    assert wait_for(lambda: pub.send(events, seq=0) or
                    proxy.value("tandem_proxy_prefix_index_blocks") == blocks)
    time.sleep(0.3)


def served(server):
    text = requests.get(server.url + "/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.M))


def wait_for(cond, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.fixture
def workers(tandem_bin, fixture_dir, tmp_path):
    args = ["--served-model-name", MODEL_NAME, "--enable-prompt-tokens-details",
            "--max-model-len", "512"]
    a = Server(tandem_bin, fixture_dir / "llama.gguf", args, tmp_path, name="worker-a")
    b = Server(tandem_bin, fixture_dir / "llama.gguf", args, tmp_path, name="worker-b")
    yield a, b
    a.stop()
    b.stop()


def complete(proxy, prompt, max_tokens=2):
    r = requests.post(proxy.url + "/v1/completions", timeout=60,
                      json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens,
                            "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


def test_requests_follow_the_instance_that_holds_their_prefix(tandem_bin, workers, tmp_path):
    a, b = workers
    ctx = zmq.Context()
    pub_a, pub_b = Publisher(ctx), Publisher(ctx)
    proxy = Proxy(tandem_bin, [a, b], [pub_a.endpoint, pub_b.endpoint], tmp_path,
                  extra=["--routing-policy", "prefix_aware"])
    try:
        tokens = requests.post(a.url + "/tokenize", json={"prompt": PROMPT}, timeout=10).json()["tokens"]
        assert len(tokens) >= 2 * BLOCK
        events, hashes = stored_events(tokens)
        join(pub_b, events, proxy, len(hashes))
        before_a, before_b = served(a), served(b)
        for i in range(4):  # least_load would alternate; the prefix holder takes them all
            complete(proxy, PROMPT + f" Question {i}?")
        assert served(b) - before_b == 4 and served(a) == before_a
        assert proxy.value("tandem_proxy_routing_decisions_total", policy="prefix_aware",
                           reason="prefix_hit") == 4
        predicted = proxy.value("tandem_proxy_prefix_predicted_cached_tokens_total")
        assert predicted == 4 * len(hashes) * BLOCK
        assert proxy.value("tandem_proxy_prefix_prompt_tokens_total") >= predicted

        # BlockRemoved of the first block: nothing matches any more; routed by load.
        pub_b.send([["BlockRemoved", hashes[:1], "GPU"]])
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == len(hashes) - 1)
        complete(proxy, PROMPT)
        assert proxy.value("tandem_proxy_routing_decisions_total", reason="no_prefix") == 1

        # The prefix now on A (the same hashes: A holds all blocks, B all but the first);
        # then a sequence gap on A drops A's entries.
        pub_a.send(events, seq=0)
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == len(hashes))
        before_a = served(a)
        complete(proxy, PROMPT + " Again?")
        assert served(a) - before_a == 1
        pub_a.send([["AllBlocksCleared"]], seq=5)  # seq 1..4 lost
        assert wait_for(lambda: proxy.value("tandem_proxy_kv_event_index_drops_total",
                                            instance=f"127.0.0.1:{a.port}") == 1)
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == len(hashes) - 1)
        # AllBlocksCleared on B empties the index.
        pub_b.send([["AllBlocksCleared"]])
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == 0)
    finally:
        assert proxy.stop() == 0
        ctx.destroy(linger=0)


def test_silent_or_down_instances_leave_the_index(tandem_bin, workers, tmp_path):
    a, b = workers
    ctx = zmq.Context()
    pub_a, pub_b = Publisher(ctx), Publisher(ctx)
    proxy = Proxy(tandem_bin, [a, b], [pub_a.endpoint, pub_b.endpoint], tmp_path,
                  extra=["--routing-policy", "prefix_aware", "--kv-events-timeout", "0.5"])
    try:
        tokens = requests.post(a.url + "/tokenize", json={"prompt": PROMPT}, timeout=10).json()["tokens"]
        events, hashes = stored_events(tokens[:2 * BLOCK])  # two blocks: the rest must be computed
        join(pub_b, events, proxy, len(hashes))
        drops = proxy.value("tandem_proxy_kv_event_index_drops_total", instance=f"127.0.0.1:{b.port}")
        complete(proxy, PROMPT)  # goes to B, which must now announce blocks; it stays silent
        assert proxy.value("tandem_proxy_routing_decisions_total", reason="prefix_hit") == 1
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == 0, timeout=5)
        assert proxy.value("tandem_proxy_kv_event_index_drops_total",
                           instance=f"127.0.0.1:{b.port}") == drops + 1
        complete(proxy, PROMPT)
        assert proxy.value("tandem_proxy_routing_decisions_total", reason="no_prefix") == 1

        # A process that goes down takes its entries with it.
        join(pub_a, events, proxy, len(hashes))
        a.proc.kill()
        a.proc.wait()
        requests.post(proxy.url + "/v1/completions", timeout=60,
                      json={"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": 1})
        assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") == 0, timeout=5)
    finally:
        assert proxy.stop() == 0
        ctx.destroy(linger=0)


@pytest.mark.parametrize("flags, message", [
    (["--worker-urls", "http://127.0.0.1:1", "--routing-policy", "prefix_aware"],
     "prefix_aware needs --kv-events-endpoints"),
    (["--worker-urls", "http://127.0.0.1:1", "--kv-events-endpoints", "tcp://a:1", "tcp://b:2"],
     "want one per worker"),
    (["--worker-urls", "http://127.0.0.1:1", "--kv-events-endpoints", "nonsense"],
     "kv events endpoint 'nonsense'"),
    (["--worker-urls", "http://127.0.0.1:1", "--kv-events-endpoints", "tcp://127.0.0.1:1",
      "--kv-events-replay-endpoints", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"],
     "one entry per --kv-events-endpoints entry"),
    (["--worker-urls", "https://127.0.0.1:1"], "https is not supported"),
    (["--worker-urls", "http://127.0.0.1:1", "--prefiller-ports", "8100"], "cannot be combined"),
    (["--routing-policy", "cache_aware"], "cache_aware"),
])
def test_bad_routing_flags_exit_2(tandem_bin, flags, message):
    r = subprocess.run([tandem_bin, "proxy", "--port", str(free_port()), *flags],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr


def test_follow_up_turn_goes_to_the_engine_holding_its_prefix(tandem_bin, fixture_dir, tmp_path):
    """Real engines publishing their own KV events (--kv-events-config): the second turn
    of a conversation goes where the first was computed (least_load would alternate), and
    that engine reports the predicted prefix as cached."""
    servers, endpoints = [], []
    try:
        for name in ("engine-a", "engine-b"):
            events = free_port()
            config = {"enable_kv_cache_events": True, "publisher": "zmq",
                      "endpoint": f"tcp://*:{events}", "topic": "kv-events"}
            servers.append(Server(tandem_bin, fixture_dir / "llama.gguf",
                                  ["--served-model-name", MODEL_NAME, "--enable-prompt-tokens-details",
                                   "--max-model-len", "512", "--kv-events-config",
                                   json.dumps(config)], tmp_path, name=name))
            endpoints.append(f"tcp://127.0.0.1:{events}")
        proxy = Proxy(tandem_bin, servers, endpoints, tmp_path, extra=["--routing-policy", "prefix_aware"])
        try:
            time.sleep(0.5)  # the SUB sockets join the publishers
            for turn_one in (PROMPT, "A different story: " + PROMPT):
                before = [served(s) for s in servers]
                blocks = proxy.value("tandem_proxy_prefix_index_blocks")  # before any new event
                first = complete(proxy, turn_one, max_tokens=4)
                after = [served(s) for s in servers]
                home = [i for i in range(2) if after[i] > before[i]]
                assert len(home) == 1
                assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") > blocks)
                follow_up = turn_one + first["choices"][0]["text"] + " And then what happened?"
                hits = proxy.value("tandem_proxy_routing_decisions_total", reason="prefix_hit")
                second = complete(proxy, follow_up, max_tokens=4)
                assert served(servers[home[0]]) == after[home[0]] + 1
                assert proxy.value("tandem_proxy_routing_decisions_total", reason="prefix_hit") == hits + 1
                assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16
            predicted = proxy.value("tandem_proxy_prefix_predicted_cached_tokens_total")
            reported = proxy.value("tandem_proxy_prefix_reported_cached_tokens_total")
            assert predicted > 0 and reported > 0
        finally:
            assert proxy.stop() == 0
    finally:
        for s in servers:
            s.stop()


def test_pd_prefill_goes_to_the_prefiller_holding_the_prefix(tandem_bin, fixture_dir, tmp_path):
    """PD mode: the policy picks the prefiller (from the prefillers' own KV events); the
    decoder is still least-load. The follow-up's prefill runs where its prefix is."""
    def kv_config(role, engine_id):
        return json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role,
                           "kv_port": str(free_port()), "engine_id": engine_id})

    common = ["--served-model-name", MODEL_NAME, "--enable-prompt-tokens-details", "--max-model-len", "512"]
    prefillers, endpoints, decoder = [], [], None
    try:
        for name in ("p-a", "p-b"):
            events = free_port()
            config = {"enable_kv_cache_events": True, "publisher": "zmq",
                      "endpoint": f"tcp://*:{events}", "topic": "kv-events"}
            prefillers.append(Server(tandem_bin, fixture_dir / "llama.gguf",
                                     [*common, "--kv-transfer-config", kv_config("kv_producer", name),
                                      "--kv-events-config", json.dumps(config)], tmp_path, name=name))
            endpoints.append(f"tcp://127.0.0.1:{events}")
        decoder = Server(tandem_bin, fixture_dir / "llama.gguf",
                         [*common, "--kv-transfer-config", kv_config("kv_consumer", "d")], tmp_path, name="d")
        pd_flags = ["--prefiller-hosts", "127.0.0.1", "127.0.0.1",
                    "--prefiller-ports", *[str(p.port) for p in prefillers],
                    "--decoder-hosts", "127.0.0.1", "--decoder-ports", str(decoder.port)]
        proxy = Proxy(tandem_bin, [], endpoints, tmp_path, instances=pd_flags,
                      extra=["--routing-policy", "prefix_aware"])
        try:
            time.sleep(0.5)  # the SUB sockets join the publishers
            before = [served(p) for p in prefillers]
            first = complete(proxy, PROMPT, max_tokens=4)
            after = [served(p) for p in prefillers]
            home = [i for i in range(2) if after[i] > before[i]]
            assert len(home) == 1
            assert wait_for(lambda: proxy.value("tandem_proxy_prefix_index_blocks") > 0)
            follow_up = PROMPT + first["choices"][0]["text"] + " And then what happened?"
            second = complete(proxy, follow_up, max_tokens=4)
            assert served(prefillers[home[0]]) == after[home[0]] + 1
            assert served(prefillers[1 - home[0]]) == after[1 - home[0]]
            assert proxy.value("tandem_proxy_routing_decisions_total", reason="prefix_hit") == 1
            # The prefiller's cached_tokens (what the proxy reports in PD mode).
            assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16
            assert proxy.value("tandem_proxy_prefix_reported_cached_tokens_total") >= 16
        finally:
            assert proxy.stop() == 0
    finally:
        for p in [*prefillers, *([decoder] if decoder else [])]:
            p.stop()
