"""`tandem pool` (the KV-cache pool worker) as users run it, with the real etcd: the seed's
dscli command lines, remote gets between two workers, kill -9 and rejoin, eviction and
pinning under load, the seed's liveness probe, and bad input. Every process started here
is stopped by pid."""
import base64
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest
import requests

from tandem_procs import free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED_SCRIPTS = ROOT / "tests" / "data" / "seed_scripts"  # verbatim from the seed guide
BLOCK = 256 << 10


@pytest.fixture(scope="session")
def pool_tool(tandem_bin):
    path = pathlib.Path(os.environ.get("TANDEM_POOL_TOOL",
                                       pathlib.Path(tandem_bin).parent.parent / "pool" / "pool_tool"))
    if not path.exists():
        pytest.fail(f"{path} not built (ninja pool_tool)")
    return str(path)


def wait_for(pred, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Etcd:
    """The real etcd on free 127.0.0.1 ports with its own data dir; stopped by pid."""

    def __init__(self, tmp_path):
        self.port, self.peer = free_port(), free_port()
        self.dir = tmp_path / "etcd"
        self.proc = None
        self.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        url, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer}"
        self.log = open(self.dir.parent / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "t", "--data-dir", str(self.dir), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls", peer,
             "--initial-advertise-peer-urls", peer, "--initial-cluster", f"t={peer}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        assert wait_for(lambda: self._ok(), 20), "etcd did not start"

    def _ok(self):
        try:
            return requests.get(f"http://{self.address}/health", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(10)

    def workers(self):
        prefix = b"/tandem/pool/workers/"
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        r = requests.post(f"http://{self.address}/v3/kv/range", timeout=5, json={
            "key": base64.b64encode(prefix).decode(), "range_end": base64.b64encode(end).decode()})
        return sorted(base64.b64decode(kv["key"]).decode()[len(prefix):]
                      for kv in r.json().get("kvs", []))


@pytest.fixture
def etcd(tmp_path):
    e = Etcd(tmp_path)
    yield e
    e.stop(signal.SIGKILL)


class Worker:
    """One `tandem pool` worker started as the seed does (`start -w`), stopped by pid."""

    def __init__(self, tandem_bin, tmp_path, etcd, host="127.0.0.1", shm_mb=64, extra=(), name="w"):
        self.bin, self.tmp, self.etcd = tandem_bin, tmp_path, etcd
        self.port = free_port()
        self.metrics_port = free_port()  # not the default (port + 1): that may be taken here
        self.address = f"{host}:{self.port}"
        self.liveness = tmp_path / f"{name}.liveness"
        self.env = dict(os.environ, TANDEM_POOL_RUN_DIR=str(tmp_path / "run"))
        self.args = ["--worker_address", self.address, "--etcd_address", etcd.address,
                     "--shared_memory_size_mb", str(shm_mb), "--node_timeout_s", "3",
                     "--node_dead_timeout_s", "6", "--liveness_check_path", str(self.liveness),
                     "--metrics_port", str(self.metrics_port), *extra]
        self.start()

    def start(self):
        r = subprocess.run([self.bin, "pool", "start", "-w", *self.args], env=self.env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        self.pid = int(re.search(r"PID: (\d+)", r.stdout).group(1))
        self.log_path = self.tmp / "run" / f"pool-{self.address.replace(':', '_')}.log"

    def alive(self):
        try:
            os.kill(self.pid, 0)
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            return False

    def stop(self):
        if self.alive():
            r = subprocess.run([self.bin, "pool", "stop", "--worker_address", self.address],
                               env=self.env, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr

    def kill9(self):
        os.kill(self.pid, signal.SIGKILL)
        assert wait_for(lambda: not self.alive(), 5)

    def metric(self, name):
        host = self.address.split(":")[0]
        text = requests.get(f"http://{host}:{self.metrics_port}/metrics", timeout=5).text
        total = 0.0
        found = False
        for m in re.finditer(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", text, re.M):
            total += float(m.group(2))
            found = True
        return total if found else None

    def log(self):
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def workers(tandem_bin, tmp_path, etcd):
    started = []

    def make(**kw):
        w = Worker(tandem_bin, tmp_path, etcd, name=f"w{len(started)}", **kw)
        started.append(w)
        return w
    yield make
    for w in started:
        if w.alive():
            os.kill(w.pid, signal.SIGKILL)


def tool(pool_tool, worker, cmd, prefix, count, size=BLOCK, timeout=60, **extra):
    args = [pool_tool, cmd, "--worker", worker.address, "--prefix", prefix, "--count", str(count),
            "--size", str(size)]
    for k, v in extra.items():
        args += [f"--{k}", str(v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def loopback2_available():
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False


def test_seed_command_line_start_stop_and_etcd_restart(tandem_bin, tmp_path, etcd, pool_tool):
    # The seed's run_yr_worker.sh with dscli -> tandem pool (small sizes and timeouts).
    w = Worker(tandem_bin, tmp_path, etcd, shm_mb=32,
               extra=["--arena_per_tenant", "1", "--enable_huge_tlb", "true",
                      "--log_only_write_info_file", "false"])
    assert etcd.workers() == [w.address]
    assert "liveness check success" in w.liveness.read_text()
    if "HugePages_Total:       0" in pathlib.Path("/proc/meminfo").read_text():
        assert "falling back to normal pages" in w.log()
    assert w.metric("tandem_pool_etcd_up") == 1
    assert w.metric("tandem_pool_capacity_bytes") == 32 << 20
    # A second start on the same address is refused.
    r = subprocess.run([tandem_bin, "pool", "start", "-w", *w.args], env=w.env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "already running" in r.stderr
    assert tool(pool_tool, w, "put", "a", 4)["stored"] == 4

    # etcd restarts (same data dir): the worker keeps serving and stays registered.
    etcd.stop(signal.SIGKILL)
    assert wait_for(lambda: w.metric("tandem_pool_etcd_up") == 0, 10)
    assert tool(pool_tool, w, "get", "a", 4)["hits"] == 4
    etcd.start()
    assert wait_for(lambda: w.metric("tandem_pool_etcd_up") == 1 and etcd.workers() == [w.address], 15)
    # etcd comes back empty (its data lost): the worker's lease is unknown, so it registers again.
    etcd.stop(signal.SIGKILL)
    shutil.rmtree(etcd.dir)
    etcd.start()
    assert wait_for(lambda: etcd.workers() == [w.address], 15)

    w.stop()
    assert not w.alive()
    assert etcd.workers() == []  # graceful stop revokes the lease at once
    r = subprocess.run([tandem_bin, "pool", "stop", "--worker_address", w.address], env=w.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "no running pool worker" in r.stderr


@pytest.mark.skipif(not loopback2_available(), reason="127.0.0.2 not bindable")
def test_remote_get_kill9_miss_and_rejoin(workers, etcd, pool_tool):
    w1 = workers(host="127.0.0.1")
    w2 = workers(host="127.0.0.2")
    assert wait_for(lambda: w1.metric("tandem_pool_ring_workers") == 2 and
                    w2.metric("tandem_pool_ring_workers") == 2, 10)
    assert tool(pool_tool, w1, "put", "m@tp0", 40)["stored"] == 40
    assert tool(pool_tool, w1, "put", "m@tp0", 40)["exists"] == 40
    assert tool(pool_tool, w1, "put", "late", 20)["stored"] == 20
    # Directory entries are written behind the puts; through worker 2 they become visible.
    assert wait_for(lambda: tool(pool_tool, w2, "exist", "m@tp0", 40)["exist"] == 40, 5)
    assert tool(pool_tool, w2, "exist", "m@tp0", 41)["prefix"] == 40
    got = tool(pool_tool, w2, "get", "m@tp0", 40)
    got.pop("seconds")
    assert got == {"hits": 40, "misses": 0, "remote": 40, "disk": 0, "corrupt": 0}
    assert w2.metric("tandem_pool_remote_gets_total") == 40
    again = tool(pool_tool, w2, "get", "m@tp0", 40)  # now a local (hot) replica
    assert again["hits"] == 40 and again["remote"] == 0 and again["corrupt"] == 0

    w1.kill9()
    t0 = time.time()
    lost = tool(pool_tool, w2, "get", "late", 20)  # only on the dead worker: misses, no error
    assert lost["hits"] == 0 and lost["misses"] == 20
    assert time.time() - t0 < 8
    assert wait_for(lambda: etcd.workers() == [w2.address], 10)  # its lease expired
    assert tool(pool_tool, w2, "exist", "late", 20)["exist"] == 0
    assert tool(pool_tool, w2, "get", "m@tp0", 40)["hits"] == 40  # replicas survive

    w1.start()  # rejoins
    assert wait_for(lambda: etcd.workers() == sorted([w1.address, w2.address]), 10)
    assert tool(pool_tool, w1, "put", "new", 10)["stored"] == 10
    assert wait_for(lambda: tool(pool_tool, w2, "get", "new", 10)["hits"] == 10, 10)


def test_small_arena_evicts_under_load_and_keeps_pinned(workers, pool_tool):
    # 16 blocks of 256 KiB; eviction from 90 % down to 80 %. A read keeps its object for
    # the lease (1 s here), pinned or not.
    w = workers(shm_mb=4, extra=("--default_kv_lease_ttl", "1000"))
    assert tool(pool_tool, w, "put", "pinned", 2)["stored"] == 2
    holder = subprocess.Popen([pool_tool, "hold", "--worker", w.address, "--prefix", "pinned",
                               "--count", "2", "--size", str(BLOCK), "--seconds", "30"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(holder.stdout.readline())["pinned"] == 2
        for batch in range(8):
            r = tool(pool_tool, w, "put", "load", 8, start=batch * 8)
            assert r["stored"] == 8, r
        assert w.metric("tandem_pool_evictions_total") >= 40
        assert w.metric("tandem_pool_bytes") <= 4 << 20
        assert tool(pool_tool, w, "get", "pinned", 2)["hits"] == 2
        assert tool(pool_tool, w, "get", "load", 8, start=56)["hits"] == 8  # the newest stay
        assert tool(pool_tool, w, "get", "load", 8, start=0)["hits"] == 0   # the oldest went
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # The holder's death released its pins: once the read leases (1 s) expire, the pinned
    # objects can be evicted.
    time.sleep(1.5)
    for batch in range(4):
        tool(pool_tool, w, "put", "more", 8, start=batch * 8)
    assert tool(pool_tool, w, "get", "pinned", 2)["hits"] == 0


def extract_seed_scripts(dest):
    """The seed's yr_liveness_check.sh and its utils.sh, as committed in tests/data."""
    for name in ("utils.sh", "yr_liveness_check.sh"):
        shutil.copy(SEED_SCRIPTS / name, dest / name)
    return dest / "yr_liveness_check.sh"


def test_seed_liveness_probe(workers, tmp_path):
    script = extract_seed_scripts(tmp_path)
    w = workers()
    env = dict(os.environ, WORKER_LOG_DIR=str(tmp_path))

    def probe():
        return subprocess.run(["bash", str(script), "-f", str(w.liveness), "-t", "2"], env=env,
                              capture_output=True, text=True, timeout=30).returncode
    time.sleep(3)  # longer than the probe timeout: the worker keeps rewriting the file
    assert probe() == 0
    w.kill9()
    assert wait_for(lambda: probe() == 1, 6, step=0.5)


def test_bad_flags_are_clear_errors(tandem_bin, tmp_path):
    env = dict(os.environ, TANDEM_POOL_RUN_DIR=str(tmp_path))
    cases = [
        (["--worker_address", "nonsense", "--etcd_address", "127.0.0.1:1"], "worker_address"),
        (["--worker_address", "127.0.0.1:5", "--etcd_address", "127.0.0.1:1",
          "--enable_huge_tlb", "maybe"], "enable_huge_tlb"),
        (["--worker_address", "127.0.0.1:5", "--etcd_address", "127.0.0.1:1",
          "--node_timeout_s", "10", "--node_dead_timeout_s", "5"], "node_dead_timeout_s"),
        (["--worker_address", "127.0.0.1:5", "--no_such_flag", "1"], "no_such_flag"),
        (["--worker_address", "127.0.0.1:5", "--shared_memory_size_mb", "lots"], "shared_memory_size_mb"),
    ]
    for args, word in cases:
        r = subprocess.run([tandem_bin, "pool", "start", "-w", *args], env=env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert word in r.stderr, r.stderr
    # etcd unreachable: start fails within its timeout with a message, nothing left behind.
    port = free_port()
    r = subprocess.run([tandem_bin, "pool", "start", "-w", "-t", "30", "--worker_address",
                        f"127.0.0.1:{port}", "--etcd_address", f"127.0.0.1:{free_port()}",
                        "--metrics_port", "0"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "etcd" in r.stderr, r.stderr
    assert not list(tmp_path.glob("*.pid"))


def frame(type_, body=b"", magic=0x4C505454, version=1, length=None):
    return struct.pack("<IHHHHIQ", magic, version, type_, 0, 0,
                       len(body) if length is None else length, 1) + body


def exchange(address, data):
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        try:
            return s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            return b""


def test_corrupt_frames_and_auth(workers, pool_tool):
    w = workers(extra=["--auth_token", "s3cret"])
    hello_peer = frame(1, struct.pack("<I", 6) + b"s3cret" + b"\x01")
    assert exchange(w.address, b"GET / HTTP/1.1\r\n\r\n" + b"x" * 64)[:4] == struct.pack("<I", 0x4C505454)
    assert len(exchange(w.address, frame(1, version=9))) >= 24          # refused, answered
    assert len(exchange(w.address, frame(1, length=0xFFFFFFFF))) >= 24  # oversize length
    # A peer that says HELLO correctly, then sends a FETCH with a lying key count.
    bad_fetch = frame(16, struct.pack("<I", 100000))
    reply = exchange(w.address, hello_peer + bad_fetch)
    assert len(reply) >= 24
    # Wrong token: refused with UNAUTHENTICATED (clients), right token works.
    r = subprocess.run([pool_tool, "put", "--worker", w.address, "--prefix", "x", "--count", "1",
                        "--auth_token", "wrong"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr
    assert tool(pool_tool, w, "put", "x", 1, auth_token="s3cret")["stored"] == 1
    assert w.alive()
    assert tool(pool_tool, w, "get", "x", 1, auth_token="s3cret")["hits"] == 1
