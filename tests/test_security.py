"""Security (docs/SECURITY.md): the API key on every route of `tandem serve` and
`tandem proxy` (health and metrics open only with --no-auth-health-metrics), what the
internal callers (proxy probes and /metrics merge, watch, bench, tandem up) send to keyed
services, loopback binding by default, the auth tokens of the KV transfer and the pool
and the same-user check on their Unix sockets, request limits (body, headers,
connections, max_tokens), and secrets kept off command lines. Real processes; traffic
only to 127.0.0.0/8; every process is stopped by pid."""
import json
import os
import signal
import socket
import struct
import subprocess
import time

import pytest
import requests

from tandem_procs import HttpProcess, Server, free_port
from test_pd import decode, prefill
from test_pool import pool_tool  # noqa: F401  (the fixture)
from test_proxy import addr, kv_config

KEY = "sec-k3y-5ecret"
BEARER = {"Authorization": f"Bearer {KEY}"}
MODEL = "fixture"
COMMON = ["--served-model-name", MODEL, "--max-model-len", "128"]
ENGINE_OPEN = ("/health", "/metrics", "/version")
PROXY_OPEN = ("/health", "/healthcheck", "/metrics")
IS_ROOT = os.geteuid() == 0
NOBODY = 65534


def get(url, path, headers=None):
    return requests.get(url + path, headers=headers or {}, timeout=10)


def assert_openai_401(r):
    assert r.status_code == 401, (r.status_code, r.text[:200])
    err = r.json()["error"]
    assert err["code"] == 401 and err["message"] and err["type"]


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


def wait_for(cond, timeout=10.0, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


# ---------------------------------------------------------------------------------------
# Which addresses a process listens on: its socket inodes (/proc/PID/fd) matched against
# the kernel's TCP tables. Nothing is sent anywhere.

def _tcp_listeners():
    """{inode: (ip, port)} of every listening TCP socket in this network namespace."""
    out = {}
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A":  # TCP_LISTEN
                continue
            hex_ip, hex_port = f[1].split(":")
            raw = bytes.fromhex(hex_ip)
            if v6:  # four host-order 32-bit words
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                ip = socket.inet_ntop(socket.AF_INET6, raw)
            else:
                ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
            out[f[9]] = (ip, int(hex_port, 16))
    return out


def listening(pid):
    """The (ip, port) pairs `pid` listens on over TCP."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    table = _tcp_listeners()
    return {table[i] for i in inodes if i in table}


def is_loopback(ip):
    return ip.startswith("127.") or ip in ("::1", "::ffff:127.0.0.1")


class Bare:
    """A tandem process started exactly as given (no --host added); ready when
    http://127.0.0.1:port/health answers 200."""

    def __init__(self, argv, port, tmp_path, name, env=None):
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))
        ok = wait_for(lambda: self.proc.poll() is not None or self._healthy(), 60)
        if not ok or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"{name} did not start: " + self.log_path.read_text(errors="replace"))

    def _healthy(self):
        try:
            return requests.get(self.url + "/health", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class ProxyProcess(HttpProcess):
    """`tandem proxy` on 127.0.0.1 (free port) with extra flags and environment."""

    def __init__(self, tandem_bin, prefillers, decoders, tmp_path, name, extra=(), env=None):
        self._args = ["--prefiller-hosts", *[h for h, _ in prefillers],
                      "--prefiller-ports", *[str(p) for _, p in prefillers],
                      "--decoder-hosts", *[h for h, _ in decoders],
                      "--decoder-ports", *[str(p) for _, p in decoders],
                      "--health-check-interval", "0.2", *extra]
        super().__init__([tandem_bin, "proxy"], tmp_path, name, env=env, timeout=30)

    def command(self, cmd):
        return [*cmd, *self._args]


# ---------------------------------------------------------------------------------------
# The API key.

@pytest.fixture(scope="module")
def keyed(tandem_bin, fixture_dir, tmp_path_factory):
    """P, D and a proxy keyed through $VLLM_API_KEY (never on a command line), plus an
    engine and a proxy with --api-key KEY --no-auth-health-metrics."""
    tmp = tmp_path_factory.mktemp("keyed")
    model = fixture_dir / "llama.gguf"
    env = {"VLLM_API_KEY": KEY}
    procs = {}
    try:
        procs["p"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_producer", "sp")],
                            tmp, "p", env=env)
        procs["d"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_consumer", "sd")],
                            tmp, "d", env=env)
        pd = ([addr(procs["p"])], [addr(procs["d"])])
        procs["proxy"] = ProxyProcess(tandem_bin, *pd, tmp, "proxy", env=env)
        procs["open_engine"] = Server(tandem_bin, model, COMMON + ["--api-key", KEY, "--no-auth-health-metrics"],
                                      tmp, "open_engine")
        procs["open_proxy"] = ProxyProcess(tandem_bin, *pd, tmp, "open_proxy",
                                           extra=["--api-key", KEY, "--no-auth-health-metrics"])
        yield procs
    finally:
        for proc in reversed(list(procs.values())):
            proc.stop()


def test_engine_health_and_metrics_need_the_key(keyed):
    url = keyed["p"].url
    for path in ENGINE_OPEN + ("/v1/models",):
        assert_openai_401(get(url, path))
        assert_openai_401(get(url, path, {"Authorization": "Bearer wrong"}))
        assert_openai_401(get(url, path, {"Authorization": KEY}))  # no scheme
        assert get(url, path, BEARER).status_code == 200, path
    assert "vllm:num_requests_running" in get(url, "/metrics", BEARER).text
    r = requests.post(url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1}, timeout=30)
    assert_openai_401(r)


def test_proxy_health_and_metrics_need_the_key(keyed):
    url = keyed["proxy"].url
    for path in PROXY_OPEN + ("/v1/models",):
        assert_openai_401(get(url, path))
        assert_openai_401(get(url, path, {"Authorization": "Bearer " + KEY[:-1]}))
        assert get(url, path, BEARER).status_code == 200, path
    for path, body in (("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2}),
                       ("/instances/remove", {"type": "decode", "instances": ["127.0.0.1:1"]})):
        assert_openai_401(requests.post(url + path, json=body, timeout=30))


def test_no_auth_health_metrics_opens_only_those(keyed):
    for name, paths in (("open_engine", ENGINE_OPEN), ("open_proxy", PROXY_OPEN)):
        url = keyed[name].url
        for path in paths:
            assert get(url, path).status_code == 200, (name, path)
        assert_openai_401(get(url, "/v1/models"))
        assert_openai_401(requests.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=30))
        assert get(url, "/v1/models", BEARER).status_code == 200


def test_a_keyed_cluster_works_through_the_proxy(keyed):
    """The proxy's key reaches the keyed engines on requests, health probes and the
    /metrics merge, and nothing carries the key on a command line."""
    for name in ("proxy", "open_proxy"):
        proxy = keyed[name]
        r = requests.post(proxy.url + "/v1/completions", headers=BEARER, timeout=60,
                          json={"model": MODEL, "prompt": "hello", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 3
        assert get(proxy.url, "/health", BEARER).json()["prefill_instances"] == 1
        # Scraped with the proxy's key: the engines' series are there, even for a client
        # that sent none (open_proxy).
        text = get(proxy.url, "/metrics", BEARER if name == "proxy" else None).text
        for role, server in (("prefill", keyed["p"]), ("decode", keyed["d"])):
            assert f'engine="{role}@127.0.0.1:{server.port}"' in text, (name, role)
    for name in ("p", "d", "proxy"):
        assert KEY not in cmdline(keyed[name].proc.pid), name


def test_watch_and_bench_send_the_key(tandem_bin, keyed, tmp_path):
    proxy = keyed["proxy"]
    env = dict(os.environ, VLLM_API_KEY=KEY)
    r = subprocess.run([tandem_bin, "watch", "-u", proxy.url, "-i", "0.2", "-n", "1"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"engine=decode@127.0.0.1:{keyed['d'].port}" in r.stdout, r.stdout
    r = subprocess.run([tandem_bin, "watch", "-u", proxy.url, "-i", "0.2", "-n", "1", "--api-key", "wrong"],
                       capture_output=True, text=True, timeout=60)
    assert "engine=decode" not in r.stdout and "401" in r.stdout + r.stderr, r.stdout + r.stderr

    out = tmp_path / "bench.json"
    engine = keyed["p"]
    r = subprocess.run([tandem_bin, "bench", "serve", "--base-url", engine.url, "--api-key", KEY,
                        "--num-prompts", "2", "--input-len", "8", "--output-len", "2", "--disable-progress",
                        "--result-file", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    assert res["completed"] == 2
    # The /metrics scrapes before and after the run were authorized.
    assert res["prefix_cache"]["local_queries_tokens"] > 0, res["prefix_cache"]


# ---------------------------------------------------------------------------------------
# Binding.

def test_serve_and_its_transfer_server_bind_loopback_by_default(tandem_bin, fixture_dir, tmp_path):
    port, kv_port = free_port(), free_port()
    serve = Bare([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--port", str(port), *COMMON,
                  "--kv-cache-memory", "64MiB", "--threads", "1",
                  "--kv-transfer-config", json.dumps({"kv_connector": "MooncakeConnectorV1",
                                                      "kv_role": "kv_producer", "kv_port": str(kv_port)})],
                 port, tmp_path, "serve")
    try:
        listens = listening(serve.proc.pid)
        assert ("127.0.0.1", port) in listens and ("127.0.0.1", kv_port) in listens, listens
        assert all(is_loopback(ip) for ip, _ in listens), listens
        # The answers advertise the loopback transfer address.
        r = requests.post(serve.url + "/v1/completions", timeout=60, json={
            "model": MODEL, "prompt": "hi", "max_tokens": 1,
            "kv_transfer_params": {"do_remote_decode": True}})
        assert r.json()["kv_transfer_params"]["remote_host"] == "127.0.0.1"
    finally:
        serve.stop()


def test_proxy_binds_loopback_by_default_and_any_address_when_told(tandem_bin, tmp_path):
    dead = str(free_port())  # backends need not exist for the listener
    base = [tandem_bin, "proxy", "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", dead,
            "--decoder-hosts", "127.0.0.1", "--decoder-ports", dead]
    port = free_port()
    proxy = Bare([*base, "--port", str(port)], port, tmp_path, "proxy")
    try:
        listens = listening(proxy.proc.pid)
        assert listens == {("127.0.0.1", port)}, listens
    finally:
        proxy.stop()
    port = free_port()
    proxy = Bare([*base, "--port", str(port), "--host", "0.0.0.0"], port, tmp_path, "proxy_any")
    try:
        assert listening(proxy.proc.pid) == {("0.0.0.0", port)}
    finally:
        proxy.stop()


# ---------------------------------------------------------------------------------------
# KV transfer: the auth token and the same-user Unix socket.

KV_MAGIC, KV_HELLO, KV_ACK, KV_ERROR, KV_PULL = 0x564B4454, 9, 5, 6, 1
TOKEN = "kv-t0ken-5ecret"


def kv_frame(type_, payload=b""):
    return struct.pack("<IHHII", KV_MAGIC, 1, type_, len(payload), 0) + payload


def kv_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def kv_exchange(sock, data):
    """Sends `data`, returns (type, payload) of the answer frame, or None when the
    connection closed without one."""
    sock.settimeout(5)
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    buf = b""
    try:
        while len(buf) < 16:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        _, _, type_, length, _ = struct.unpack("<IHHII", buf[:16])
        while len(buf) < 16 + length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    except (ConnectionResetError, socket.timeout):
        return None
    return type_, buf[16:16 + length]


@pytest.fixture(scope="module")
def kv_pair(tandem_bin, fixture_dir, tmp_path_factory):
    """A producer whose token comes from $TANDEM_KV_AUTH_TOKEN, a consumer with the right
    token and one with a wrong token (both recompute when a pull fails)."""
    tmp = tmp_path_factory.mktemp("kv")
    model = fixture_dir / "llama.gguf"
    kv_port = free_port()

    def cfg(role, port=None):
        c = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "engine_id": role}
        if port:
            c["kv_port"] = str(port)
        return ["--kv-transfer-config", json.dumps(c)]

    procs = {}
    try:
        procs["p"] = Server(tandem_bin, model, COMMON + cfg("kv_producer", kv_port), tmp, "p",
                            env={"TANDEM_KV_AUTH_TOKEN": TOKEN})
        procs["d_good"] = Server(tandem_bin, model, COMMON + cfg("kv_consumer"), tmp, "d_good",
                                 env={"TANDEM_KV_AUTH_TOKEN": TOKEN})
        procs["d_bad"] = Server(tandem_bin, model, COMMON + cfg("kv_consumer"), tmp, "d_bad",
                                env={"TANDEM_KV_AUTH_TOKEN": "not-the-token"})
        procs["kv_port"] = kv_port
        yield procs
    finally:
        for name in ("d_bad", "d_good", "p"):
            if name in procs:
                procs[name].stop()


def test_transfer_refuses_frames_without_the_token(kv_pair):
    port = kv_pair["kv_port"]
    assert TOKEN not in cmdline(kv_pair["p"].proc.pid)
    with socket.create_connection(("127.0.0.1", port)) as s:  # no HELLO
        reply = kv_exchange(s, kv_frame(KV_PULL, kv_str("req") + kv_str("fp")))
        assert reply is not None and reply[0] == KV_ERROR and b"auth token" in reply[1], reply
    with socket.create_connection(("127.0.0.1", port)) as s:  # wrong HELLO
        reply = kv_exchange(s, kv_frame(KV_HELLO, kv_str("wrong")))
        assert reply is not None and reply[0] == KV_ERROR and b"auth token" in reply[1], reply
    with socket.create_connection(("127.0.0.1", port)) as s:  # the token
        assert kv_exchange(s, kv_frame(KV_HELLO, kv_str(TOKEN))) == (KV_ACK, b"")
    # The same-host Unix socket asks for the token too.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(f"\0tandem-kv-{port}")
        reply = kv_exchange(s, kv_frame(KV_HELLO, kv_str("wrong")))
        assert reply is not None and reply[0] == KV_ERROR, reply


def as_other_user(fn):
    """Runs fn() in a forked child that switched to uid/gid 65534; returns what it
    returned (bytes)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(w, fn())
        except BaseException:  # noqa: BLE001 - report through the exit code
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return data


@pytest.mark.skipif(not IS_ROOT, reason="needs root to connect as another user")
def test_transfer_unix_socket_refuses_another_user_even_with_the_token(kv_pair):
    name = f"\0tandem-kv-{kv_pair['kv_port']}"

    def hello_as_nobody():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(name)
            reply = kv_exchange(s, kv_frame(KV_HELLO, kv_str(TOKEN)))
            return b"none" if reply is None else struct.pack("<H", reply[0])

    assert as_other_user(hello_as_nobody) == b"none"  # closed: no ACK, so no memfd either
    assert wait_for(lambda: "refusing a same-host peer" in kv_pair["p"].log(), 5)
    # This process (root) is still served.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(name)
        assert kv_exchange(s, kv_frame(KV_HELLO, kv_str(TOKEN))) == (KV_ACK, b"")


def test_a_consumer_with_a_wrong_token_pulls_nothing(kv_pair):
    p, good, bad = kv_pair["p"], kv_pair["d_good"], kv_pair["d_bad"]
    body = {"model": MODEL, "prompt": "the quick brown fox jumps over the lazy dog " * 3, "max_tokens": 4,
            "temperature": 0, "ignore_eos": True}
    ok_before = good.metric("tandem_kv_transfer_pulls_total", result="ok") or 0
    out = decode(good, body, prefill(p, body)["kv_transfer_params"])
    assert out["usage"]["completion_tokens"] == 4
    assert good.metric("tandem_kv_transfer_pulls_total", result="ok") == ok_before + 1
    failed_before = bad.metric("tandem_kv_transfer_pulls_total", result="failed") or 0
    out = decode(bad, body, prefill(p, body)["kv_transfer_params"])  # recomputes instead
    assert out["usage"]["completion_tokens"] == 4
    assert bad.metric("tandem_kv_transfer_pulls_total", result="failed") == failed_before + 1
    assert bad.metric("tandem_kv_transfer_pulls_total", result="ok") in (None, 0)
    assert "auth token" in bad.log()


# ---------------------------------------------------------------------------------------
# Pool worker: the auth token from the environment and the same-user Unix socket.

def test_pool_token_from_the_environment_and_another_user_refused(tandem_bin, tmp_path, pool_tool,
                                                                 monkeypatch):
    from test_pool import Etcd, Worker, exchange, frame, tool
    etcd = Etcd(tmp_path)
    monkeypatch.setenv("TANDEM_POOL_AUTH_TOKEN", "p00l-5ecret")
    worker = Worker(tandem_bin, tmp_path, etcd, name="w")  # inherits the token
    try:
        assert "p00l-5ecret" not in cmdline(worker.pid)
        assert all(is_loopback(ip) for ip, _ in listening(worker.pid)), listening(worker.pid)
        # The client library reads the same variable.
        assert tool(pool_tool, worker, "put", "k", 1)["stored"] == 1
        env = dict(os.environ)
        env.pop("TANDEM_POOL_AUTH_TOKEN")
        r = subprocess.run([pool_tool, "get", "--worker", worker.address, "--prefix", "k", "--count", "1"],
                           env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr, r.stderr
        # A peer (TCP) with a wrong token is refused.
        reply = exchange(worker.address, frame(1, struct.pack("<I", 5) + b"wrong" + b"\x01"))
        assert len(reply) >= 24 and b"bad auth token" in reply, reply
        if IS_ROOT:
            # Another user with the right token gets no arena (memfd) over the Unix socket.
            r = subprocess.run([pool_tool, "get", "--worker", worker.address, "--prefix", "k", "--count", "1"],
                               user=NOBODY, group=NOBODY, capture_output=True, text=True, timeout=30)
            assert r.returncode == 1 and "PERMISSION_DENIED" in r.stderr, r.stdout + r.stderr
        assert worker.alive()
    finally:
        if worker.alive():
            os.kill(worker.pid, signal.SIGKILL)
        etcd.stop(signal.SIGKILL)


# ---------------------------------------------------------------------------------------
# Request limits.

LIMITS = ["--max-body-bytes", "4KiB", "--max-header-bytes", "2KiB", "--max-connections", "4"]


@pytest.fixture(scope="module")
def limited(tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    model = fixture_dir / "llama.gguf"
    procs = {}
    try:
        procs["p"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_producer", "lp")],
                            tmp, "lp")
        procs["d"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_consumer", "ld")],
                            tmp, "ld")
        procs["engine"] = Server(tandem_bin, model, COMMON + LIMITS, tmp, "engine")
        procs["proxy"] = ProxyProcess(tandem_bin, [addr(procs["p"])], [addr(procs["d"])], tmp, "lproxy",
                                      extra=LIMITS)
        yield procs
    finally:
        for proc in reversed(list(procs.values())):
            proc.stop()


@pytest.mark.parametrize("target", ["engine", "proxy"])
def test_body_and_header_limits(limited, target):
    url = limited[target].url
    big = json.dumps({"model": MODEL, "prompt": "x " * 3000, "max_tokens": 1})
    r = requests.post(url + "/v1/completions", data=big, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["code"] == 413, r.text[:200]
    r = requests.get(url + "/health", headers={"X-Big": "a" * 3000}, timeout=30)
    assert r.status_code == 431 and r.json()["error"]["code"] == 431, r.text[:200]
    assert requests.post(url + "/v1/completions", timeout=60,
                         json={"model": MODEL, "prompt": "hi", "max_tokens": 1}).status_code == 200


@pytest.mark.parametrize("target", ["engine", "proxy"])
def test_max_tokens_beyond_the_context_is_400(limited, target):
    url = limited[target].url
    r = requests.post(url + "/v1/completions", timeout=60, json={"model": MODEL, "prompt": "hello", "max_tokens": 1000})
    assert r.status_code == 400, r.text
    assert "maximum context length is 128 tokens" in r.json()["error"]["message"]
    r = requests.post(url + "/v1/chat/completions", timeout=60, json={
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 10 ** 9})
    assert r.status_code == 400, r.text


@pytest.mark.parametrize("target", ["engine", "proxy"])
def test_over_the_connection_limit_is_a_quick_503(limited, target):
    server = limited[target]
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
    try:
        time.sleep(0.3)  # all four accepted
        start = time.time()
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.settimeout(5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 503"), data[:200]
        assert time.time() - start < 2
    finally:
        for s in idle:
            s.close()
    assert wait_for(lambda: get(server.url, "/health").status_code == 200, 5)


# ---------------------------------------------------------------------------------------
# A keyed `tandem up` cluster: every secret from the environment.

def test_tandem_up_cluster_with_every_secret_in_the_environment(tandem_bin, fixture_dir, tmp_path, monkeypatch):
    from test_cluster import Up, make_cluster
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.setenv("TANDEM_KV_AUTH_TOKEN", TOKEN)
    monkeypatch.setenv("TANDEM_POOL_AUTH_TOKEN", "p00l-5ecret")
    path, spec = make_cluster(tmp_path, fixture_dir)
    up = Up(tandem_bin, path, tmp_path)
    try:
        state = up.wait_ready()  # the readiness probes of the keyed engines and proxy got in
        assert 'Authorization: Bearer $VLLM_API_KEY' in up.output()
        proxy = f"http://127.0.0.1:{spec['proxy']['port']}"
        assert_openai_401(get(proxy, "/health"))
        r = requests.post(proxy + "/v1/chat/completions", headers=BEARER, timeout=120, json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert r.status_code == 200, r.text
        for secret in (KEY, TOKEN, "p00l-5ecret"):
            assert secret not in path.read_text() and secret not in json.dumps(state)
            for service in state["services"]:
                assert secret not in cmdline(service["pid"]), service["name"]
        for svc in state["services"]:
            assert all(is_loopback(ip) for ip, _ in listening(svc["pid"])), svc["name"]
    finally:
        if up.proc.poll() is None:
            up.proc.send_signal(signal.SIGINT)
            try:
                up.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
        subprocess.run([tandem_bin, "down", str(path), "--timeout", "5"], capture_output=True, timeout=60)
