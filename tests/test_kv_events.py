"""KV cache events (`tandem serve --kv-events-config`): a real server publishes vLLM's
KVEventBatch messages over ZMQ; these tests subscribe with pyzmq, decode with msgpack and
vLLM's field order (vllm/distributed/kv_events.py, array_like structs), and check the
hashes against Tandem's own prefix-cache keys (kv_hash_tool), the sequence numbers, the
replay socket, eviction and reset, bad configs, and that a stalled publisher never stalls
the engine."""
import pathlib
import re
import socket
import subprocess
import threading
import time

import msgpack
import pytest
import requests
import zmq

from tandem_procs import Server, free_port

BLOCK = 4  # tokens per KV block: small blocks give many events from short prompts
# vLLM's field order after the tag (the class name).
FIELDS = {
    "BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                    "medium", "lora_name"],
    "BlockRemoved": ["block_hashes", "medium"],
    "AllBlocksCleared": [],
}
END_SEQ = b"\xff" * 8


def decode_batch(payload):
    """KVEventBatch [ts, [event...], data_parallel_rank] -> (ts, [dict], rank)."""
    ts, raw_events, rank = msgpack.unpackb(payload, raw=False)
    events = []
    for raw in raw_events:
        tag, values = raw[0], raw[1:]
        fields = FIELDS[tag]
        assert len(values) >= len(fields), raw
        events.append({"type": tag, **dict(zip(fields, values))})
    return ts, events, rank


class Subscriber:
    """A SUB socket on the server's PUB endpoint, collecting [topic, seq, payload]."""

    def __init__(self, endpoint, topic):
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.sub.connect(endpoint)
        self.messages = []  # (topic, seq, payload)

    def poll(self, timeout_s):
        """Receives until `timeout_s` passes without a message."""
        while self.sub.poll(int(timeout_s * 1000)):
            topic, seq, payload = self.sub.recv_multipart()
            assert len(seq) == 8
            self.messages.append((topic, int.from_bytes(seq, "big"), payload))

    def sync(self, server):
        """Waits until the subscription reaches the PUB socket (ZMQ drops what a subscriber
        sends before that: the slow joiner): resets the prefix cache, which publishes an
        AllBlocksCleared batch, until one arrives; then forgets what arrived."""
        for _ in range(200):
            assert requests.post(server.url + "/reset_prefix_cache", timeout=10).status_code == 200
            if self.sub.poll(100):
                break
        else:
            raise AssertionError("no KV event batch reached the subscriber")
        self.poll(0.3)
        assert all(e["type"] == "AllBlocksCleared" for e in self.events())
        self.messages.clear()

    def events(self):
        return [e for _, _, p in self.messages for e in decode_batch(p)[1]]

    def wait_for(self, predicate, timeout_s=20):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            self.poll(0.2)
            if predicate(self.events()):
                return self.events()
        raise AssertionError(f"events never matched; got {self.events()}")

    def close(self):
        self.sub.close(0)
        self.ctx.term()


def replay(endpoint, start_seq):
    """vLLM's replay protocol: send the start sequence number, get [seq, payload] per
    buffered batch, then [-1, b""]."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(endpoint)
    try:
        dealer.send_multipart([b"", start_seq.to_bytes(8, "big")])
        out = []
        while True:
            assert dealer.poll(10000), "replay did not answer"
            empty, seq, payload = dealer.recv_multipart()
            assert empty == b""
            if seq == END_SEQ:
                assert payload == b""
                return out
            out.append((int.from_bytes(seq, "big"), payload))
    finally:
        dealer.close(0)
        ctx.term()


def complete(server, prompt_ids, max_tokens=1):
    r = server.post("/v1/completions", {"model": server.model_name, "prompt": prompt_ids,
                                        "max_tokens": max_tokens, "temperature": 0,
                                        "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()


def plain_metric(server, name):
    text = requests.get(server.url + "/metrics", timeout=10).text
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def hash_tool(tandem_bin):
    return pathlib.Path(tandem_bin).parent.parent / "kv" / "kv_hash_tool"


def tandem_keys(tandem_bin, fingerprint, tokens):
    """Tandem's prefix-cache keys for `tokens`, from kv_hash_tool (a separate process)."""
    out = subprocess.run([str(hash_tool(tandem_bin)), f"--fingerprint={fingerprint}",
                          f"--block-size={BLOCK}", "--dtype=f16", *map(str, tokens)],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[1:]  # the first line is the root hash


@pytest.fixture(scope="module")
def events_server(tandem_bin, fixture_dir, tmp_path_factory):
    pub, rep = free_port(), free_port()
    config = (f'{{"enable_kv_cache_events": true, "publisher": "zmq", '
              f'"endpoint": "tcp://*:{pub}", "replay_endpoint": "tcp://*:{rep}", '
              f'"topic": "kv-events", "buffer_steps": 1000}}')
    # 0.000763 of Server's 256 MiB = 200 KiB of KV = 100 blocks of 4 tokens (2 KiB each on
    # this fixture): small enough that a dozen distinct prompts evict.
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--served-model-name", "fixture", "--block-size", str(BLOCK),
                     "--gpu-memory-utilization", "0.000763",
                     "--max-model-len", "128", "--kv-events-config", config],
                    tmp_path_factory.mktemp("kv_events"))
    server.model_name = "fixture"
    server.pub_endpoint = f"tcp://127.0.0.1:{pub}"
    server.replay_endpoint = f"tcp://127.0.0.1:{rep}"
    server.fingerprint = re.search(r"model fingerprint (\S+)", server.log()).group(1)
    yield server
    assert server.stop() == 0


def test_events_follow_vllm_and_carry_tandems_prefix_keys(events_server, tandem_bin):
    s = events_server
    sub = Subscriber(s.pub_endpoint, "kv-events")
    try:
        sub.sync(s)
        a = list(range(10, 28))  # 18 tokens: 4 full blocks and 2 left over
        before = time.time()
        complete(s, a)
        events = sub.wait_for(lambda ev: any(e["type"] == "BlockStored" for e in ev))
        topic, seq, payload = sub.messages[0]
        assert topic == b"kv-events"
        ts, _, rank = decode_batch(payload)
        assert before - 1 <= ts <= time.time() + 1 and rank == 0
        stored = [e for e in events if e["type"] == "BlockStored"]
        assert len(stored) == 1, stored
        e = stored[0]
        assert e["parent_block_hash"] is None  # the sequence's first block
        assert e["token_ids"] == a[:16] and e["block_size"] == BLOCK
        assert e["lora_id"] is None and e["lora_name"] is None and e["medium"] == "CPU"
        assert all(isinstance(h, bytes) and len(h) == 16 for h in e["block_hashes"])
        keys_a = tandem_keys(tandem_bin, s.fingerprint, a)
        assert [h.hex() for h in e["block_hashes"]] == keys_a

        # A prompt sharing a's first two blocks stores only its own two, chained to a's.
        b = a[:8] + list(range(300, 310))
        r = complete(s, b)
        events = sub.wait_for(lambda ev: len([x for x in ev if x["type"] == "BlockStored"]) >= 2)
        e = [x for x in events if x["type"] == "BlockStored"][1]
        assert e["parent_block_hash"].hex() == keys_a[1]
        assert e["token_ids"] == b[8:16]
        assert [h.hex() for h in e["block_hashes"]] == tandem_keys(tandem_bin, s.fingerprint, b)[2:]

        # Reset: AllBlocksCleared, after which a is stored again under the same keys.
        assert requests.post(s.url + "/reset_prefix_cache", timeout=10).status_code == 200
        sub.wait_for(lambda ev: ev[-1]["type"] == "AllBlocksCleared")
        complete(s, a)
        events = sub.wait_for(lambda ev: ev[-1]["type"] == "BlockStored")
        assert [h.hex() for h in events[-1]["block_hashes"]] == keys_a

        # Sequence numbers: consecutive on the PUB socket...
        seqs = [m[1] for m in sub.messages]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        # ...and the replay socket returns the same batches, from the first one on.
        replayed = dict(replay(s.replay_endpoint, 0))
        assert sorted(replayed) == list(range(0, seqs[-1] + 1))
        for _, seq, payload in sub.messages:
            assert replayed[seq] == payload
        # A start past the end gets just the end marker.
        assert replay(s.replay_endpoint, seqs[-1] + 1) == []
    finally:
        sub.close()


def test_eviction_reports_only_blocks_that_were_cached(events_server):
    s = events_server
    sub = Subscriber(s.pub_endpoint, "kv-events")
    try:
        sub.sync(s)
        start = replay(s.replay_endpoint, 0)  # the index so far, as a late subscriber rebuilds it
        # 14 distinct prompts of 10 full blocks each: more than the 100-block cache holds.
        for i in range(14):
            complete(s, [1 + (i * 40 + j) % 700 for j in range(40)])
        sub.wait_for(lambda ev: any(e["type"] == "BlockRemoved" for e in ev))
        sub.poll(0.5)
        # Replaying everything from seq 0 must describe a consistent index: a removed hash
        # was stored before and not removed since; a reset empties the index.
        index = set()
        removed = 0
        batches = replay(s.replay_endpoint, 0)
        assert len(batches) >= len(start)
        for _, payload in batches:
            for e in decode_batch(payload)[1]:
                if e["type"] == "BlockStored":
                    for h in e["block_hashes"]:
                        assert h not in index
                        index.add(h)
                elif e["type"] == "BlockRemoved":
                    assert e["medium"] == "CPU"
                    for h in e["block_hashes"]:
                        assert h in index, "removed a block that was not cached"
                        index.remove(h)
                        removed += 1
                else:
                    index.clear()
        assert removed > 0
        assert len(index) <= 100  # never more cached blocks than the cache has
    finally:
        sub.close()


BAD_CONFIGS = [
    ("{not json", "not valid JSON"),
    ('{"enable_kv_cache_events": true, "publisher": "kafka"}', 'unknown publisher "kafka"'),
    ('{"enable_kv_cache_events": true, "topik": "x"}', 'unknown key "topik"'),
    ('{"enable_kv_cache_events": true, "max_queue_size": 0}', "max_queue_size"),
    ('{"enable_kv_cache_events": true, "endpoint": "tcp://*:notaport"}', "tcp://*:notaport"),
]


@pytest.mark.parametrize("config,message", BAD_CONFIGS)
def test_bad_config_exits_2(tandem_bin, fixture_dir, config, message):
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--port", str(free_port()),
                        "--kv-events-config", config], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "--kv-events-config" in r.stderr and message in r.stderr, r.stderr


def test_endpoint_that_cannot_bind_exits_2(tandem_bin, fixture_dir):
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        for key in ("endpoint", "replay_endpoint"):
            config = f'{{"enable_kv_cache_events": true, "{key}": "tcp://*:{port}"}}'
            if key == "replay_endpoint":  # the PUB socket itself binds somewhere free
                config = config[:-1] + f', "endpoint": "tcp://*:{free_port()}"}}'
            r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"),
                                "--port", str(free_port()), "--kv-events-config", config],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 2, r.stderr
            assert f"tcp://*:{port}" in r.stderr, r.stderr
    finally:
        holder.close()


def test_stalled_publisher_never_stalls_the_engine(tandem_bin, fixture_dir, tmp_path):
    pub = free_port()
    config = (f'{{"enable_kv_cache_events": true, "endpoint": "tcp://*:{pub}", '
              f'"hwm": 1, "max_queue_size": 1}}')
    # TEST ONLY fault: every send takes 500 ms, as on a stalled network.
    server = Server(tandem_bin, fixture_dir / "llama.gguf",
                    ["--served-model-name", "fixture", "--block-size", str(BLOCK), "--max-model-len", "128",
                     "--kv-events-config", config],
                    tmp_path, env={"TANDEM_FAULT_KV_EVENTS_SEND_DELAY_MS": "500"})
    server.model_name = "fixture"
    ctx = zmq.Context()
    slow = ctx.socket(zmq.SUB)  # subscribes and never reads
    slow.setsockopt(zmq.SUBSCRIBE, b"")
    slow.setsockopt(zmq.RCVHWM, 1)
    slow.connect(f"tcp://127.0.0.1:{pub}")
    try:
        results, errors = [], []

        def one(i):
            try:
                # Prompt lengths 20..27: the requests fill their blocks on different steps,
                # so nearly every step has an event batch.
                results.append(complete(server, [5 + i * 50 + j for j in range(20 + i)], max_tokens=24))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        begin = time.time()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        health = time.time()
        assert requests.get(server.url + "/health", timeout=5).status_code == 200
        health = time.time() - health
        for t in threads:
            t.join(120)
        elapsed = time.time() - begin
        assert not errors, errors
        assert len(results) == 8
        assert all(r["usage"]["completion_tokens"] == 24 for r in results)
        dropped = plain_metric(server, "tandem_kv_events_dropped_total")
        assert dropped is not None and dropped > 0
        batches = (plain_metric(server, "tandem_kv_event_batches_dropped_total")
                   + plain_metric(server, "tandem_kv_event_batches_published_total"))
        assert batches >= 16, batches
        # An engine that waited for the publisher would need 0.5 s for every batch beyond
        # the queue and the one in flight; dropping keeps the engine at its own pace.
        assert elapsed < (batches - 2) * 0.5 / 2, f"engine stalled: {elapsed:.1f}s for {batches} batches"
        assert health < 2
    finally:
        slow.close(0)
        ctx.term()
        assert server.stop() == 0  # shutdown does not hang on the stalled publisher either
