"""Faults against a real PD cluster (etcd, a pool worker, a prefiller P, a decoder D and
the proxy), each with the outcome docs/RELIABILITY.md promises: every request ends
(tokens or an OpenAI error) within its bound; no KV block, transfer lease or pool pin
stays held; the cluster serves normally once the fault clears.

The link faults put P in a network namespace made by the test (a veth to the root
namespace, link-local addresses no route of the host covers; iptables inside it for
drops and loss; a delaying relay for latency). They are skipped where namespaces cannot
be made (not root). Processes are stopped by pid."""
import json
import os
import signal
import socket
import threading
import time

import pytest
import requests

from fault_tools import DelayRelay, Netns, netns_available
from tandem_procs import HttpProcess, Server, free_port
from test_pool import Etcd, Worker, wait_for
from test_proxy import Proxy

MODEL = "fixture"
LEASE_S = 3          # kv_lease_s: an unclaimed prefill's blocks are freed after this
IDLE_S = 5           # the proxy's --backend-idle-timeout
COMMON = ["--served-model-name", MODEL, "--enable-prompt-tokens-details", "--max-model-len", "512"]
PROXY_FLAGS = ["--backend-idle-timeout", str(IDLE_S), "--max-retries", "2", "--retry-delay", "0.05"]


def mooncake(role, kv_port=None, kv_ip=None):
    c = {"kv_connector": "MooncakeConnectorV1", "kv_role": role,
         "kv_connector_extra_config": {"kv_lease_s": LEASE_S}}
    if kv_port:
        c["kv_port"] = str(kv_port)
    if kv_ip:
        c["kv_ip"] = kv_ip
    return c


def with_pool(connector, role):
    return {"kv_connector": "MultiConnector", "kv_role": role, "engine_id": "0",
            "kv_connector_extra_config": {"connectors": [connector, {
                "kv_connector": "AscendStoreConnector", "kv_role": role,
                "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}}]}}


def prompt(tag, words=40):
    return f"{tag}: " + " ".join(f"token{(i * 7919) % 1000}" for i in range(words))


def body(text, max_tokens=8, stream=False):
    return {"model": MODEL, "prompt": text, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": stream}


def complete(url, text, max_tokens=8, timeout=60):
    """(status, json) of a non-streaming completion; status None when the connection failed."""
    try:
        r = requests.post(url + "/v1/completions", json=body(text, max_tokens), timeout=timeout)
    except requests.RequestException as e:
        return None, {"exception": repr(e)}
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {"raw": r.text}


def stream_events(url, text, max_tokens, on_first=None, timeout=60):
    """Streams a completion; returns ("ok"|"error"|"broken", text, seconds). `error` means
    a terminal error (a non-200 answer or an error event before [DONE])."""
    start = time.time()
    got = ""
    try:
        with requests.post(url + "/v1/completions", json=body(text, max_tokens, True), stream=True,
                           timeout=timeout) as r:
            if r.status_code != 200:
                return "error", r.text, time.time() - start
            for line in r.iter_lines():
                if not line.startswith(b"data: "):
                    continue
                if line == b"data: [DONE]":
                    return "ok", got, time.time() - start
                event = json.loads(line[6:])
                if "error" in event:
                    return "error", json.dumps(event), time.time() - start
                if on_first is not None:
                    on_first()
                    on_first = None
                got += "".join(c.get("text") or "" for c in event.get("choices", []))
        return "broken", got, time.time() - start
    except requests.RequestException:
        return "broken", got, time.time() - start


def is_openai_error(status, answer):
    return status is not None and status >= 400 and isinstance(answer.get("error"), dict) \
        and "message" in answer["error"]


class Background:
    """Runs fn(*args) on a thread; .result(timeout) returns its value."""

    def __init__(self, fn, *args):
        self.value, self.done = None, threading.Event()

        def go():
            try:
                self.value = fn(*args)
            finally:
                self.done.set()
        threading.Thread(target=go, daemon=True).start()

    def result(self, timeout):
        assert self.done.wait(timeout), f"did not end within {timeout} s"
        return self.value


def gauge(server, name):
    try:
        return server.metric(name)
    except requests.RequestException:
        return None


def assert_clean(engines, proxy=None, worker=None, timeout=LEASE_S + 7):
    """Nothing held: no running request, no KV block in use, no transfer lease, no pool
    pin, no request in the proxy."""
    def clean():
        for e in engines:
            for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting"):
                if gauge(e, name) != 0:
                    return False
            if gauge(e, "tandem_kv_transfer_leases") not in (None, 0):
                return False
        if proxy is not None and requests.get(proxy.url + "/health", timeout=5).json()["request_num"] != 0:
            return False
        if worker is not None and worker.metric("tandem_pool_pinned_objects") != 0:
            return False
        return True
    if not wait_for(clean, timeout, 0.1):
        state = {e.log_path.name: {n: gauge(e, n) for n in ("vllm:kv_cache_usage_perc", "vllm:num_requests_running",
                                                             "tandem_kv_transfer_leases")} for e in engines}
        if worker is not None:
            state["pool pins"] = worker.metric("tandem_pool_pinned_objects")
        raise AssertionError(f"resources still held after {timeout} s: {state}")


class Cluster:
    """etcd + pool worker + P (Mooncake producer + pool) + D (Mooncake consumer + pool) +
    proxy, all on 127.0.0.1. Any part can be killed and started again on its port."""

    def __init__(self, tandem_bin, model, tmp, d_args=()):
        self.bin, self.model, self.tmp = tandem_bin, model, tmp
        self.d_args = list(d_args)
        self.kv_port = free_port()
        self.etcd = Etcd(tmp)
        self.worker = self.p = self.d = self.proxy = None
        self.want = {}
        try:
            self.worker = Worker(tandem_bin, tmp, self.etcd, name="w", shm_mb=64)
            self.p = self.start_p()
            self.d = self.start_d()
            self.proxy = self.start_proxy()
        except Exception:
            self.stop()  # the daemonized pool worker would outlive the test
            raise

    def engine_env(self):
        return {"DS_WORKER_ADDR": self.worker.address}

    def start_p(self, port=None):
        config = with_pool(mooncake("kv_producer", self.kv_port), "kv_producer")
        return Server(self.bin, self.model, [*COMMON, "--kv-transfer-config", json.dumps(config)], self.tmp, "p",
                      env=self.engine_env(), port=port)

    def start_d(self, port=None):
        config = with_pool(mooncake("kv_consumer"), "kv_consumer")
        return Server(self.bin, self.model, [*COMMON, *self.d_args, "--kv-transfer-config", json.dumps(config)],
                      self.tmp, "d", env=self.engine_env(), port=port)

    def start_proxy(self, port=None):
        return Proxy(self.bin, [("127.0.0.1", self.p.port)], [("127.0.0.1", self.d.port)], self.tmp,
                     extra=PROXY_FLAGS, port=port)

    def expect(self, text, max_tokens=8):
        """The greedy answer, learnt before any fault."""
        status, answer = complete(self.proxy.url, text, max_tokens)
        assert status == 200, answer
        self.want[(text, max_tokens)] = answer["choices"][0]["text"]
        return self.want[(text, max_tokens)]

    def assert_serves(self, tag="after", n=3, timeout=30):
        """Fresh prompts and the learnt ones all answer as before the fault."""
        def ok():
            status, _ = complete(self.proxy.url, prompt(f"{tag}-probe", 5), 2, timeout=20)
            return status == 200
        assert wait_for(ok, timeout, 0.2), "the cluster does not serve again"
        for (text, max_tokens), want in list(self.want.items())[:n]:
            status, answer = complete(self.proxy.url, text, max_tokens)
            assert status == 200, answer
            assert answer["choices"][0]["text"] == want

    def assert_clean(self):
        assert_clean([self.p, self.d], self.proxy, self.worker)

    def stop(self):
        for part in (self.proxy, self.d, self.p):
            if part is not None:
                part.stop()
        if self.worker is not None and self.worker.alive():
            os.kill(self.worker.pid, signal.SIGKILL)
        self.etcd.stop(signal.SIGKILL)


def stream_on_decoder(cluster, tag):
    """A long streamed request through the proxy, returned once D is generating it."""
    job = Background(stream_events, cluster.proxy.url, prompt(tag, 10), 300)
    assert wait_for(lambda: gauge(cluster.d, "vllm:num_requests_running") == 1, 20, 0.02)
    return job


@pytest.fixture
def cluster(request, tandem_bin, fixture_dir, tmp_path):
    """The cluster on the llama fixture; a test parametrized with {"d_args": [...]} gives
    D more flags, {"model": "default"} runs the real model (slow enough, ~20 tokens/s on
    2 cores, that a fault reliably lands mid-stream)."""
    param = getattr(request, "param", {})
    model = fixture_dir / "llama.gguf"
    if param.get("model") == "default":
        model = request.getfixturevalue("default_model")
    c = Cluster(tandem_bin, model, tmp_path, d_args=param.get("d_args", ()))
    try:
        yield c
    finally:
        for part in (c.p, c.d):  # a SIGSTOPped process cannot take SIGTERM
            if part is not None and part.proc.poll() is None:
                os.kill(part.proc.pid, signal.SIGCONT)
        c.stop()


def test_kill9_pool_worker_under_load(cluster):
    texts = [prompt(f"pool{i}", 30) for i in range(6)]
    wants = [cluster.expect(t, 6) for t in texts]
    jobs = [Background(complete, cluster.proxy.url, t, 6) for t in texts]
    time.sleep(0.05)
    cluster.worker.kill9()
    # The pool is a cache: losing it costs no request.
    for job, want in zip(jobs, wants):
        status, answer = job.result(60)
        assert status == 200, answer
        assert answer["choices"][0]["text"] == want
    status, _ = complete(cluster.proxy.url, prompt("while-the-pool-is-gone", 20), 4)
    assert status == 200
    cluster.worker.start()
    assert wait_for(lambda: cluster.worker.address in cluster.etcd.workers(), 15)
    cluster.assert_serves()
    cluster.assert_clean()


def test_kill9_prefiller(cluster):
    cluster.expect(prompt("p-before"), 8)
    jobs = [Background(stream_events, cluster.proxy.url, prompt(f"p{i}", 60), 40) for i in range(4)]
    time.sleep(0.2)
    cluster.p.proc.send_signal(signal.SIGKILL)
    cluster.p.proc.wait()
    # In-flight requests end: finished (D already had the prompt or recomputed it) or a
    # terminal error; none hangs.
    for job in jobs:
        outcome, _, seconds = job.result(30)
        assert outcome in ("ok", "error"), outcome
    # With no prefiller left, new requests fail fast with an OpenAI error.
    start = time.time()
    status, answer = complete(cluster.proxy.url, prompt("no-prefiller"), 4)
    assert is_openai_error(status, answer) and status in (502, 503), (status, answer)
    assert time.time() - start < 10
    cluster.p = cluster.start_p(port=cluster.p.port)
    cluster.assert_serves()
    cluster.assert_clean()


@pytest.mark.parametrize("cluster", [{"model": "default"}], indirect=True)
def test_kill9_decoder_mid_stream(cluster):
    cluster.expect(prompt("d-before"), 8)
    job = stream_on_decoder(cluster, "victim")
    cluster.d.proc.send_signal(signal.SIGKILL)
    cluster.d.proc.wait()
    outcome, text, seconds = job.result(15)
    assert outcome == "error", (outcome, text)  # a terminal error event, not a silent cut
    status, answer = complete(cluster.proxy.url, prompt("no-decoder"), 4)
    assert is_openai_error(status, answer), (status, answer)
    cluster.d = cluster.start_d(port=cluster.d.port)
    cluster.assert_serves()
    cluster.assert_clean()


@pytest.mark.parametrize("cluster", [{"model": "default"}], indirect=True)
def test_proxy_restart(cluster):
    cluster.expect(prompt("proxy-before"), 8)
    job = stream_on_decoder(cluster, "cut")
    cluster.proxy.proc.send_signal(signal.SIGKILL)
    cluster.proxy.proc.wait()
    outcome, _, _ = job.result(10)
    assert outcome == "broken"  # the client sees its connection end at once
    # The engines notice the proxy's connections closing and free everything.
    assert_clean([cluster.p, cluster.d], worker=cluster.worker)
    cluster.proxy = cluster.start_proxy(port=cluster.proxy.port)
    cluster.assert_serves()
    cluster.assert_clean()


def test_etcd_stopped_and_restarted(cluster):
    cluster.expect(prompt("etcd-before"), 8)
    cluster.etcd.stop()
    # Serving does not depend on etcd: requests go on while it is down.
    for i in range(3):
        status, answer = complete(cluster.proxy.url, prompt(f"no-etcd{i}", 20), 4)
        assert status == 200, answer
    assert wait_for(lambda: cluster.worker.metric("tandem_pool_etcd_up") == 0, 15)
    cluster.etcd.start()
    assert wait_for(lambda: cluster.worker.metric("tandem_pool_etcd_up") == 1, 20)
    assert wait_for(lambda: cluster.worker.address in cluster.etcd.workers(), 20)
    cluster.assert_serves()
    cluster.assert_clean()


@pytest.mark.parametrize("cluster", [{"model": "default"}], indirect=True)
def test_hung_decoder_sigstop(cluster):
    cluster.expect(prompt("stop-before"), 8)
    job = stream_on_decoder(cluster, "frozen")
    os.kill(cluster.d.proc.pid, signal.SIGSTOP)
    try:
        # The proxy gives up on the silent decoder after --backend-idle-timeout.
        outcome, text, seconds = job.result(IDLE_S + 10)
        assert outcome == "error", (outcome, text)
        # While it is hung, new requests end with an error within the same bound.
        start = time.time()
        status, answer = complete(cluster.proxy.url, prompt("during-stop"), 4, timeout=IDLE_S + 20)
        assert is_openai_error(status, answer), (status, answer)
        assert time.time() - start < IDLE_S + 10
    finally:
        os.kill(cluster.d.proc.pid, signal.SIGCONT)
    cluster.assert_serves()
    cluster.assert_clean()


def test_hung_prefiller_sigstop(cluster):
    cluster.expect(prompt("pstop-before"), 8)
    os.kill(cluster.p.proc.pid, signal.SIGSTOP)
    try:
        start = time.time()
        status, answer = complete(cluster.proxy.url, prompt("during-pstop"), 4, timeout=4 * IDLE_S + 20)
        assert is_openai_error(status, answer), (status, answer)
        assert time.time() - start < 2 * IDLE_S + 10
    finally:
        os.kill(cluster.p.proc.pid, signal.SIGCONT)
    cluster.assert_serves()
    cluster.assert_clean()


def test_client_disconnect_mid_stream(cluster):
    payload = json.dumps(body(prompt("gone", 10), 300, True))
    with socket.create_connection(("127.0.0.1", cluster.proxy.port), timeout=30) as s:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n{payload}").encode())
        got = b""
        while b"data:" not in got:
            data = s.recv(4096)
            assert data
            got += data
    cluster.assert_clean()
    cluster.expect(prompt("after-disconnect"), 4)


def test_slow_reader_does_not_stall_others(cluster):
    """A client that stops reading its stream for a while: the others are served as
    usual, and the slow one still gets every token once it reads again."""
    want = cluster.expect(prompt("slow", 10), 200)
    payload = json.dumps(body(prompt("slow", 10), 200, True))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.connect(("127.0.0.1", cluster.proxy.port))
    try:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(payload)}\r\n\r\n{payload}").encode())
        time.sleep(0.5)
        for i in range(4):  # meanwhile, other requests are answered normally
            start = time.time()
            status, answer = complete(cluster.proxy.url, prompt(f"fast{i}", 10), 8)
            assert status == 200, answer
            assert time.time() - start < 10
        # The decoder finished long ago: a reader that does not read holds up nobody.
        assert wait_for(lambda: gauge(cluster.d, "vllm:num_requests_running") == 0, 20, 0.05)
        # Read the rest slowly (small reads with pauses): all of it arrives.
        data = b""
        s.settimeout(30)
        while not data.endswith(b"data: [DONE]\r\n\r\n") and b"data: [DONE]" not in data[-64:]:
            chunk = s.recv(512)
            assert chunk, "connection closed early"
            data += chunk
            time.sleep(0.002)
    finally:
        s.close()
    text = ""
    for line in data.split(b"\n"):
        line = line.strip()
        if line.startswith(b"data: {"):
            text += "".join(c.get("text") or "" for c in json.loads(line[6:]).get("choices", []))
    assert text == want
    cluster.assert_clean()


@pytest.mark.parametrize("cluster", [{"d_args": ["--max-num-seqs", "2", "--max-waiting-requests", "2"]}],
                         indirect=True)
def test_overload_is_a_quick_503(cluster):
    """More requests than the decoder may queue: the excess gets 503 (an OpenAI error)
    at once, the rest are served, and nothing stays held."""
    def one(i):
        start = time.time()
        status, answer = complete(cluster.proxy.url, prompt(f"load{i}", 10), 150)
        return status, answer, time.time() - start
    jobs = [Background(one, i) for i in range(16)]
    results = [job.result(120) for job in jobs]
    statuses = sorted(r[0] for r in results)
    assert set(statuses) == {200, 503}, statuses
    for status, answer, seconds in results:
        if status == 503:
            assert is_openai_error(status, answer), answer
            assert seconds < 3, seconds  # rejected at once, not after a wait
        else:
            assert answer["usage"]["completion_tokens"] == 150
    # Busy is not broken: the proxy did not take the decoder out of rotation.
    assert f'tandem_proxy_backend_up{{instance="127.0.0.1:{cluster.d.port}",role="decode"}} 1' in \
        requests.get(cluster.proxy.url + "/metrics", timeout=10).text
    cluster.assert_clean()
    cluster.assert_serves()


# ---- faults on the P<->D link: P in a namespace of its own ----

needs_netns = pytest.mark.skipif(not netns_available(), reason="needs root (network namespaces, iptables)")


class NsPrefiller(HttpProcess):
    """`tandem serve` as a producer inside namespace `ns`, serving on its veth address."""

    def __init__(self, tandem_bin, model, ns, tmp, kv_port, kv_ip, port=8100):
        self.ns = ns
        self._args = ["--kv-cache-memory", "256MiB", "--threads", "2", *COMMON, "--kv-transfer-config",
                      json.dumps(mooncake("kv_producer", kv_port, kv_ip))]
        super().__init__([tandem_bin, "serve", str(model)], tmp, "p-ns", port=port, host=ns.ip)

    def command(self, cmd):
        return [*self.ns.prefix(), *cmd, *self._args]


class NsCluster:
    """P in namespace `ns` (192.0.2.x), D and the proxy on 127.0.0.1. D reaches P's
    transfer port at `kv_ip` (P's veth address, or a relay in front of it)."""

    def __init__(self, tandem_bin, fixture_dir, tmp, via_root=False):
        self.ns = Netns()
        self.p = self.d = self.proxy = None
        self.want = {}
        self.rules = []
        try:
            self.kv_port = 30000
            model = fixture_dir / "llama.gguf"
            # via_root: P advertises the root side of the veth, where a relay can listen.
            kv_ip = self.ns.root_ip if via_root else self.ns.ip
            self.p = NsPrefiller(tandem_bin, model, self.ns, tmp, self.kv_port, kv_ip)
            self.d = Server(tandem_bin, model,
                            [*COMMON, "--kv-transfer-config", json.dumps(mooncake("kv_consumer"))], tmp, "d")
            self.proxy = Proxy(tandem_bin, [(self.ns.ip, self.p.port)], [("127.0.0.1", self.d.port)], tmp,
                               extra=PROXY_FLAGS)
        except Exception:
            self.close()
            raise

    expect = Cluster.expect
    assert_serves = Cluster.assert_serves

    def drop(self, *rule):
        self.rules.append(self.ns.iptables(*rule))

    def clear_rules(self):
        while self.rules:
            self.ns.exec("iptables", *self.rules.pop())

    def pulls(self, result):
        return self.d.metric("tandem_kv_transfer_pulls_total", result=result) or 0

    def direct(self, text, max_tokens=8):
        """P's own (colocated) greedy answer: what D must produce from P's KV."""
        status, answer = complete(self.p.url, text, max_tokens)
        assert status == 200, answer
        return answer["choices"][0]["text"]

    def assert_clean(self):
        assert_clean([self.p, self.d], self.proxy)

    def close(self):
        for part in (self.proxy, self.d, self.p):
            if part is not None:
                part.stop()
        self.ns.close()


@pytest.fixture
def ns_cluster(tandem_bin, fixture_dir, tmp_path):
    made = []

    def make(**kw):
        made.append(NsCluster(tandem_bin, fixture_dir, tmp_path, **kw))
        return made[-1]
    yield make
    for c in made:
        c.close()


@needs_netns
def test_pd_link_drop_recomputes_and_frees_the_lease(ns_cluster):
    c = ns_cluster()
    want = c.expect(prompt("link", 30), 8)
    assert c.pulls("ok") >= 1  # the transfer path works across the namespaces
    failed = c.pulls("failed")
    c.drop("-A", "INPUT", "-p", "tcp", "--dport", str(c.kv_port), "-j", "DROP")
    start = time.time()
    status, answer = complete(c.proxy.url, prompt("link", 30) + " again", 8)
    assert status == 200, answer
    assert time.time() - start < 20  # connect timeout (3 s), then D recomputes
    assert c.pulls("failed") == failed + 1
    status, answer = complete(c.proxy.url, prompt("link", 30), 8)
    assert answer["choices"][0]["text"] == want
    # D could not tell P it was done: P's lease runs out and frees the blocks.
    c.assert_clean()
    c.clear_rules()
    ok = c.pulls("ok")
    c.expect(prompt("link-back", 30), 8)
    assert c.pulls("ok") == ok + 1
    c.assert_clean()


@needs_netns
def test_p_link_down_fails_fast_and_recovers(ns_cluster):
    c = ns_cluster()
    c.expect(prompt("down-before", 20), 8)
    c.ns.link(up=False)
    try:
        start = time.time()
        status, answer = complete(c.proxy.url, prompt("while-down", 20), 4, timeout=60)
        assert is_openai_error(status, answer), (status, answer)
        assert time.time() - start < 2 * IDLE_S + 10
    finally:
        c.ns.link(up=True)
    c.assert_serves()
    c.assert_clean()


@needs_netns
def test_five_percent_loss_on_the_p_link(ns_cluster):
    c = ns_cluster()
    texts = [prompt(f"loss{i}", 60) for i in range(6)]
    wants = [c.expect(t, 8) for t in texts]
    lossy = [c.direct(t + " lossy") for t in texts]
    for chain in ("INPUT", "OUTPUT"):
        c.drop("-A", chain, "-m", "statistic", "--mode", "random", "--probability", "0.05", "-j", "DROP")
    ok = c.pulls("ok")
    for t, want in zip(texts, lossy):
        # Prompts D has not seen: each is prefilled on P and pulled over the lossy link.
        status, answer = complete(c.proxy.url, t + " lossy", 8, timeout=90)
        assert status == 200, answer
        assert answer["choices"][0]["text"] == want
    assert c.pulls("ok") > ok  # TCP carried the pulls through the loss
    c.clear_rules()
    c.assert_serves()
    c.assert_clean()


@needs_netns
def test_200ms_delay_on_the_pd_link(ns_cluster):
    # P advertises the root side of the veth as its transfer address; a relay there
    # forwards to P with 200 ms each way.
    c = ns_cluster(via_root=True)
    relay = DelayRelay(c.ns.root_ip, c.kv_port, (c.ns.ip, c.kv_port), 0.2)
    try:
        texts = [prompt(f"delay{i}", 40) for i in range(3)]
        wants = [c.direct(t) for t in texts]
        for t, want in zip(texts, wants):
            start = time.time()
            status, answer = complete(c.proxy.url, t, 8)
            assert status == 200, answer
            assert answer["choices"][0]["text"] == want
            assert time.time() - start > 0.4  # at least one round trip through the relay
        assert c.pulls("ok") == len(texts) and c.pulls("failed") == 0
        c.assert_clean()
    finally:
        relay.close()
