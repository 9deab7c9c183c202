"""Integration tests for `tandem serve` with vLLM's data-parallel flags: a supervisor that
runs its local ranks behind one OpenAI front end, a --headless node that registers its
ranks there, rank death and restart, and the flag checks. Real processes on 127.0.0.1,
stopped by pid."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

from tandem_procs import HttpProcess, free_port

MODEL = "fixture"
# The TEST ONLY step delay makes a long stream last long enough to kill its rank mid-way.
ENV = {"TANDEM_FAULT_ENGINE_STEP_DELAY_MS": "10"}


def common(fixture_dir):
    return [str(fixture_dir / "llama.gguf"), "--served-model-name", MODEL, "--max-model-len", "256",
            "--kv-cache-memory", "32MiB"]


class FrontEnd(HttpProcess):
    """`tandem serve --data-parallel-size N --data-parallel-size-local M` (ranks 0..M-1)."""

    def __init__(self, tandem_bin, fixture_dir, tmp_path, size, local, rpc_port, port, extra=()):
        self._args = ["--data-parallel-size", str(size), "--data-parallel-size-local", str(local),
                      "--data-parallel-rpc-port", str(rpc_port), "--threads", str(local), *extra]
        self.rpc_url = f"http://127.0.0.1:{rpc_port}"
        super().__init__([tandem_bin, "serve", *common(fixture_dir)], tmp_path, "front", env=ENV, timeout=30,
                         port=port)

    def command(self, cmd):
        return [*cmd, *self._args]

    def ranks(self):
        return {r["rank"]: r for r in requests.get(self.rpc_url + "/dp/ranks", timeout=5).json()["ranks"]}

    def wait_ranks(self, want_up, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            up = {r for r, info in self.ranks().items() if info["state"] == "up"}
            if up == set(want_up):
                return
            time.sleep(0.05)
        raise AssertionError(f"ranks up {self.ranks()}, want {want_up}: {self.log()[-3000:]}")

    def rank_pid(self, rank):
        pids = re.findall(rf"DP rank {rank} \(port \d+\) started \(pid (\d+)\)", self.log())
        return int(pids[-1])


def start_headless(tandem_bin, fixture_dir, tmp_path, size, start, local, rpc_port, port, extra=()):
    log = open(tmp_path / f"headless{start}.log", "ab")
    cmd = [tandem_bin, "serve", *common(fixture_dir), "--headless", "--data-parallel-size", str(size),
           "--data-parallel-start-rank", str(start), "--data-parallel-size-local", str(local),
           "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", str(rpc_port),
           "--port", str(port), "--threads", "1", *extra]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **ENV))


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def generated_tokens(text, engine):
    """vllm:generation_tokens_total of one engine label in a /metrics text."""
    total = 0.0
    for m in re.finditer(r'^vllm:generation_tokens_total\{([^}]*)\} (\S+)$', text, re.M):
        if f'engine="{engine}"' in m.group(1):
            total += float(m.group(2))
    return total


def complete(url, max_tokens=8, stream=False):
    return requests.post(url + "/v1/completions", json={"model": MODEL, "prompt": "hello there",
                                                        "max_tokens": max_tokens, "stream": stream,
                                                        "ignore_eos": True},
                         timeout=60, stream=stream)


def burst(url, n, max_tokens=8):
    codes = []
    threads = [threading.Thread(target=lambda: codes.append(complete(url, max_tokens).status_code))
               for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


@pytest.fixture(scope="module")
def cluster(tandem_bin, fixture_dir, tmp_path_factory):
    """N=3: a headless node with rank 2 started FIRST, then the front end with ranks 0, 1."""
    tmp = tmp_path_factory.mktemp("dp")
    port = free_port(4)  # the front end's port, then the ranks' (port + 1 + rank)
    rpc = free_port(2)   # registration, and rpc + 1 (reserved)
    headless = start_headless(tandem_bin, fixture_dir, tmp, 3, 2, 1, rpc, port)
    try:
        time.sleep(0.5)  # it is up and retrying before the front end exists
        assert headless.poll() is None
        front = FrontEnd(tandem_bin, fixture_dir, tmp, 3, 2, rpc, port)
    except BaseException:
        stop(headless)
        raise
    try:
        front.wait_ranks({0, 1, 2})
        yield front, headless, tmp
    finally:
        front.stop()
        stop(headless)


def test_one_model_completions_and_chat(cluster):
    front, _, _ = cluster
    models = requests.get(front.url + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    r = front.client().completions.create(model=MODEL, prompt="Hello", max_tokens=4,
                                          extra_body={"ignore_eos": True})  # sampled: EOS may come early
    assert r.usage.completion_tokens == 4
    c = front.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=4)
    assert c.choices[0].message.role == "assistant" and 1 <= c.usage.completion_tokens <= 4


def test_requests_spread_over_every_rank_and_metrics_carry_the_rank(cluster, tmp_path):
    front, headless, tmp = cluster
    before = requests.get(front.url + "/metrics", timeout=10).text
    assert burst(front.url, 9, max_tokens=16) == [200] * 9
    after = requests.get(front.url + "/metrics", timeout=10).text
    for rank in ("0", "1", "2"):  # 2 is the headless node's rank
        assert generated_tokens(after, rank) > generated_tokens(before, rank), (rank, after[-2000:])
    assert 'vllm:num_requests_running{engine="0"' in after and 'vllm:num_requests_running{engine="1"' in after
    log = (tmp / "headless2.log").read_text()
    assert "waiting for the data-parallel front end" in log and "registered DP ranks 2..2" in log


def test_a_dead_rank_fails_its_requests_is_avoided_and_rejoins(cluster):
    front, _, _ = cluster
    pid = front.rank_pid(1)
    rank_url = f"http://127.0.0.1:{front.port + 2}"
    outcomes = []

    def long_stream():
        r = complete(front.url, max_tokens=250, stream=True)
        body = r.content.decode()
        outcomes.append((r.status_code, '"error"' in body, '"finish_reason":"length"' in body))

    threads = [threading.Thread(target=long_stream) for _ in range(3)]  # one per rank by load
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while time.time() < deadline:
        text = requests.get(rank_url + "/metrics", timeout=5).text
        if re.search(r'^vllm:num_requests_running\{[^}]*\} [1-9]', text, re.M):
            break
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    for t in threads:
        t.join()
    assert sum(1 for _, err, done in outcomes if err and not done) >= 1, outcomes  # the dead rank's
    assert sum(1 for code, err, done in outcomes if code == 200 and done and not err) >= 1, outcomes
    # New requests avoid it while it restarts.
    assert [complete(front.url).status_code for _ in range(6)] == [200] * 6
    front.wait_ranks({0, 1, 2})  # restarted by the supervisor, up again
    assert front.rank_pid(1) != pid
    # rank 1's own /metrics: its engine label is its rank (the front end relabels anyway)
    before = generated_tokens(requests.get(rank_url + "/metrics", timeout=5).text, "1")
    assert burst(front.url, 9, max_tokens=16) == [200] * 9
    assert generated_tokens(requests.get(rank_url + "/metrics", timeout=5).text, "1") > before


def test_a_headless_rank_that_dies_is_reported_down_and_rejoins(cluster):
    front, headless, tmp = cluster
    log = (tmp / "headless2.log").read_text()
    pid = int(re.findall(r"DP rank 2 \(port \d+\) started \(pid (\d+)\)", log)[-1])
    os.kill(pid, signal.SIGKILL)
    # No request goes to it: "down" can only come from its node's report.
    deadline = time.time() + 5
    while front.ranks()[2]["state"] != "down":
        assert time.time() < deadline, front.ranks()
        time.sleep(0.02)
    assert burst(front.url, 4) == [200] * 4
    front.wait_ranks({0, 1, 2})
    assert "reported down by its node" in front.log()


def test_registration_refuses_ranks_outside_the_size(cluster):
    front, _, _ = cluster
    r = requests.post(front.rpc_url + "/dp/ranks", json={"rank": 3, "address": "127.0.0.1:1"}, timeout=5)
    assert r.status_code == 400 and "--data-parallel-size" in r.json()["error"]["message"]
    r = requests.post(front.rpc_url + "/dp/ranks", json={"address": "127.0.0.1:1"}, timeout=5)
    assert r.status_code == 400 and "rank" in r.json()["error"]["message"]
    assert set(front.ranks()) == {0, 1, 2}


def test_front_end_without_a_rank_up_is_unhealthy(tandem_bin, fixture_dir, tmp_path):
    """An API-only node (--data-parallel-size-local 0): /health and requests get 503 until
    a rank registers and answers."""
    port, rpc = free_port(), free_port(2)
    log = open(tmp_path / "api_only.log", "ab")
    proc = subprocess.Popen([tandem_bin, "serve", *common(fixture_dir), "--port", str(port),
                             "--data-parallel-size", "2", "--data-parallel-size-local", "0",
                             "--data-parallel-rpc-port", str(rpc)], stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 10
        while True:
            try:
                health = requests.get(url + "/health", timeout=2)
                break
            except requests.RequestException:
                assert time.time() < deadline and proc.poll() is None
                time.sleep(0.05)
        assert health.status_code == 503 and health.json()["worker_instances_up"] == 0
        assert complete(url).status_code == 503
        assert requests.get(f"http://127.0.0.1:{rpc}/dp/ranks", timeout=5).json() == {"size": 2, "ranks": []}
    finally:
        assert stop(proc) == 0


@pytest.mark.parametrize("args,flag", [
    (["--data-parallel-size", "2", "--data-parallel-size-local", "3"], "--data-parallel-size-local"),
    (["--data-parallel-size", "2", "--data-parallel-start-rank", "2"], "--data-parallel-start-rank"),
    (["--data-parallel-size", "4", "--data-parallel-start-rank", "3", "--data-parallel-size-local", "2"],
     "--data-parallel-start-rank"),
    (["--data-parallel-size", "2", "--headless"], "--data-parallel-address"),
    (["--data-parallel-size", "4", "--data-parallel-rank", "1", "--data-parallel-size-local", "2"],
     "--data-parallel-size-local"),
    (["--data-parallel-size", "2", "--data-parallel-rank", "2"], "--data-parallel-rank"),
    (["--api-server-count", "2"], "--api-server-count"),
    (["--data-parallel-size", "2", "--data-parallel-join-timeout", "5"], "--data-parallel-join-timeout"),
])
def test_bad_flags_exit_2_naming_the_flag(tandem_bin, fixture_dir, args, flag):
    r = subprocess.run([tandem_bin, "serve", *common(fixture_dir), "--port", str(free_port()), *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and flag in r.stderr, r.stderr


def test_headless_without_a_front_end_gives_up_naming_the_address(tandem_bin, fixture_dir, tmp_path):
    rpc = free_port(2)
    proc = start_headless(tandem_bin, fixture_dir, tmp_path, 2, 1, 1, rpc, free_port(3),
                          extra=["--data-parallel-join-timeout", "1"])
    try:
        assert proc.wait(timeout=30) == 2
    finally:
        stop(proc)
    log = (tmp_path / "headless1.log").read_text()
    assert f"waiting for the data-parallel front end at 127.0.0.1:{rpc}" in log
    assert f"no data-parallel front end answered at 127.0.0.1:{rpc}" in log and "--data-parallel-address" in log
