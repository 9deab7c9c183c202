"""Integration tests of the operations tools: `tandem launch`, `tandem probe`,
`tandem watch` and `tandem bench serve`, against real `tandem serve` processes and a real
etcd, next to the seed guide's own probe scripts (tests/data/seed_scripts)."""
import http.server
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from tandem_procs import Server, free_port

SEED_SCRIPTS = pathlib.Path(__file__).resolve().parent / "data" / "seed_scripts"


@pytest.fixture
def tandem(tandem_bin):
    """The binary as an absolute path (several tests run it from a temporary directory)."""
    return os.path.abspath(tandem_bin)


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop_pid(proc, timeout=20):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def glm5_server(tandem, fixture_dir, tmp_path):
    """A fixture-model server named glm5 (the model tests/data/seed_scripts probe) whose replies are fixed."""
    script = tmp_path / "reply.txt"
    script.write_text("Hello there, all good.")
    server = Server(tandem, fixture_dir / "llama.gguf",
                    ["--served-model-name", "glm5", "--scripted-output-file", str(script)],
                    tmp_path, name="glm5")
    yield server
    server.stop()


@pytest.fixture
def etcd(tmp_path):
    """A real etcd on free 127.0.0.1 ports; yields its client address."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd not installed")
    client, peer = free_port(), free_port()
    log = open(tmp_path / "etcd.log", "wb")
    proc = subprocess.Popen(
        ["etcd", "--name", "t", "--data-dir", str(tmp_path / "etcd-data"),
         "--listen-client-urls", f"http://127.0.0.1:{client}",
         "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"t=http://127.0.0.1:{peer}"],
        stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{client}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if requests.get(f"http://{address}/health", timeout=1).json().get("health") == "true":
                break
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.1)
    else:
        stop_pid(proc)
        pytest.fail("etcd did not become healthy")
    holder = {"proc": proc, "address": address}
    yield holder
    stop_pid(holder["proc"])
    log.close()


def seed_scripts(tmp_path, api_port, etcd_port=12379, liveness_file="/workspace/liveness"):
    """The seed scripts in tmp_path/seed with only host, ports and paths changed."""
    out = tmp_path / "seed"
    out.mkdir(exist_ok=True)
    log = str(tmp_path / "seed_probe.log")
    for name in ("vllm_probe.py", "vllm_probe_yr.py", "utils.sh", "etcd_liveness_check.sh",
                 "yr_liveness_check.sh"):
        text = (SEED_SCRIPTS / name).read_text()
        if name.endswith(".py"):
            text = text.replace("local_ip = socket.gethostbyname(hostname)", 'local_ip = "127.0.0.1"')
            text = text.replace("local_ip = socket.gethostbyname(socket.gethostname())",
                                'local_ip = "127.0.0.1"')
            text = text.replace("{local_ip}:8000/", "{local_ip}:%d/" % api_port)
            text = text.replace("etcd_port = 12379", "etcd_port = %d" % etcd_port)
            text = text.replace("'./health_check_probe.log'", repr(log))
        if name == "yr_liveness_check.sh":
            text = text.replace("PROBE_PATH=/workspace/liveness", "PROBE_PATH=" + liveness_file)
        (out / name).write_text(text)
    return out, log


# ---------------------------------------------------------------------------- probe


def test_probe_readiness_agrees_with_the_seed_script(tandem, glm5_server, tmp_path):
    seed_dir, seed_log = seed_scripts(tmp_path, glm5_server.port)
    log = tmp_path / "probe.log"
    ours = run([tandem, "probe", "readiness", "--host", "127.0.0.1", "--port",
                str(glm5_server.port), "--log-file", str(log)])
    seed = run([sys.executable, "vllm_probe.py"], cwd=seed_dir)
    assert ours.returncode == 0, ours.stderr
    assert seed.returncode == 0, pathlib.Path(seed_log).read_text()
    assert ours.stdout == seed.stdout == "vLLM serve check success!\n"
    assert "health check success, response:" in log.read_text()
    assert "Hello" in log.read_text()

    glm5_server.stop()
    ours = run([tandem, "probe", "readiness", "--host", "127.0.0.1", "--port",
                str(glm5_server.port), "--log-file", str(log), "--timeout", "5"])
    seed = run([sys.executable, "vllm_probe.py"], cwd=seed_dir)
    assert ours.returncode == seed.returncode == 1
    assert ours.stdout == seed.stdout == ""
    assert "requests post failed" in log.read_text()
    assert "requests post failed" in pathlib.Path(seed_log).read_text()


def test_probe_readiness_fails_on_http_errors(tandem, glm5_server, tmp_path):
    log = tmp_path / "probe.log"
    r = run([tandem, "probe", "readiness", "--url",
             glm5_server.url + "/v1/chat/completions", "--model", "other", "--log-file", str(log)])
    assert r.returncode == 1
    assert "Response error, status code: 404" in log.read_text()


def test_probe_liveness_agrees_with_the_seed_scripts(tandem, glm5_server, etcd, tmp_path):
    live = tmp_path / "liveness"
    live.write_text("liveness check success\n")
    etcd_port = int(etcd["address"].split(":")[1])
    seed_dir, seed_log = seed_scripts(tmp_path, glm5_server.port, etcd_port, str(live))
    env = dict(os.environ, WORKER_LOG_DIR=str(tmp_path))  # utils.sh logs there

    def ours(role, *extra):
        return run([tandem, "probe", "liveness", role, "-f", str(live), "--etcd-address",
                    etcd["address"], "--host", "127.0.0.1", "--port", str(glm5_server.port),
                    "--log-file", str(tmp_path / "probe.log"), "--etcd-timeout", "2", *extra])

    def seed_yr():
        return run(["bash", "./yr_liveness_check.sh", "-f", str(live), "-t", "30"],
                   cwd=seed_dir, env=env)

    def seed_etcd():
        return run(["bash", "./etcd_liveness_check.sh", etcd["address"]], cwd=seed_dir, env=env)

    # Healthy: the whole master check, ours and the seed's.
    r = ours("master")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["pool liveness check success",
                                     "etcd is ready: " + etcd["address"],
                                     "vLLM serve check success!"]
    seed = run([sys.executable, "vllm_probe_yr.py", "master"], cwd=seed_dir, env=env)
    assert seed.returncode == 0, seed.stdout + seed.stderr + pathlib.Path(seed_log).read_text()
    assert "etcd is ready" in seed.stdout and "vLLM serve check success!" in seed.stdout
    assert seed_yr().returncode == 0 and seed_etcd().returncode == 0
    assert ours("slave").returncode == 0
    assert run([tandem, "probe", "liveness", "--role", "slave", "-f", str(live),
                "--log-file", str(tmp_path / "role.log")]).returncode == 0

    # Stale file: both fail; a longer timeout accepts it.
    old = time.time() - 60
    os.utime(live, (old, old))
    assert ours("slave").returncode == 1
    assert seed_yr().returncode == 1
    assert ours("slave", "-t", "120").returncode == 0

    # Wrong content: both fail.
    live.write_text("liveness check failed\n")
    assert ours("slave").returncode == 1
    assert seed_yr().returncode == 1
    live.write_text("liveness check success\n")

    # etcd down: the master check fails at etcd, as the seed's etcd check does.
    stop_pid(etcd["proc"])
    r = ours("master")
    assert r.returncode == 1
    assert "etcd is ready" not in r.stdout
    assert seed_etcd().returncode == 1
    assert ours("slave").returncode == 0  # slaves do not check etcd
    assert "etcd check fail" in (tmp_path / "probe.log").read_text()


def test_probe_liveness_needs_a_role(tandem):
    r = run([tandem, "probe", "liveness"])
    assert r.returncode == 2 and "master or slave" in r.stderr
    assert run([tandem, "probe", "liveness", "primary"]).returncode == 2


# ---------------------------------------------------------------------------- launch

TEMPLATE = """#!/bin/bash
# run_dp_template.sh for the tests: launch_online_dp.py's arguments, tandem serve instead of vllm.
# $1 devices (core ids) $2 port $3 dp size $4 dp rank $5 dp address $6 rpc port $7 tp size
{fail}
"$TANDEM_BIN" serve "$TANDEM_TEST_MODEL" --host 127.0.0.1 --port $2 --cpu-affinity $1 \\
    --threads 1 --kv-cache-memory 64MiB --served-model-name glm5 \\
    --data-parallel-size $3 --data-parallel-rank $4 --data-parallel-address $5 \\
    --data-parallel-rpc-port $6 --tensor-parallel-size $7
"""


def consecutive_free_ports(n):
    return free_port(n)


def start_launch(tandem, fixture_dir, tmp_path, fail="", extra=()):
    (tmp_path / "run_dp_template.sh").write_text(TEMPLATE.format(fail=fail))
    base = consecutive_free_ports(2)
    env = dict(os.environ, TANDEM_BIN=tandem, TANDEM_TEST_MODEL=str((fixture_dir / "llama.gguf").resolve()))
    log = open(tmp_path / "launch.log", "wb")
    proc = subprocess.Popen(
        [tandem, "launch", "--dp-size", "4", "--tp-size", "1", "--dp-size-local", "2",
         "--dp-rank-start", "2", "--dp-address", "127.0.0.1", "--dp-rpc-port", "13345",
         "--vllm-start-port", str(base), "--stop-timeout", "20", *extra],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, base, log


def wait_healthy(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "launch exited early"
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"rank on port {port} not healthy")


def test_launch_runs_a_rank_per_local_dp_rank_and_forwards_sigterm(tandem, fixture_dir,
                                                                    tmp_path):
    proc, base, log = start_launch(tandem, fixture_dir, tmp_path)
    try:
        wait_healthy(base, proc)
        wait_healthy(base + 1, proc)
        text = (tmp_path / "launch.log").read_text()
        # Ranks 2 and 3 of 4 on this node, cores 0 and 1, the seed's argument order.
        assert "data-parallel rank 2 of 4 (address 127.0.0.1:13345)" in text
        assert "data-parallel rank 3 of 4 (address 127.0.0.1:13345)" in text
        assert f"rank 2 (devices 0, port {base}) started" in text
        assert f"rank 3 (devices 1, port {base + 1}) started" in text
        r = requests.post(f"http://127.0.0.1:{base + 1}/v1/completions",
                          json={"model": "glm5", "prompt": "hi", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        # The engines (children of the template shells) are gone too.
        assert not port_open(base) and not port_open(base + 1)
        assert "shutdown complete" in (tmp_path / "launch.log").read_text()
    finally:
        stop_pid(proc)
        log.close()


def test_launch_stops_the_other_ranks_when_one_fails(tandem, fixture_dir, tmp_path):
    fail = 'if [ "$4" = "3" ]; then sleep 2; echo "rank 3 fails" >&2; exit 3; fi'
    proc, base, log = start_launch(tandem, fixture_dir, tmp_path, fail=fail)
    try:
        wait_healthy(base, proc)
        assert proc.wait(timeout=40) == 3
        assert not port_open(base)
        text = (tmp_path / "launch.log").read_text()
        assert "exited with status 3" in text and "stopping the other ranks" in text
    finally:
        stop_pid(proc)
        log.close()


def test_launch_without_template_fails_like_the_seed(tandem, tmp_path):
    r = run([tandem, "launch", "--dp-size", "2", "--dp-address", "127.0.0.1"], cwd=tmp_path)
    assert r.returncode == 1
    assert "Template file ./run_dp_template.sh does not exist." in r.stdout


@pytest.mark.parametrize("args", [
    ["launch", "--dp-size", "2", "--dp-address", "h", "--bogus"],
    ["launch", "--dp-address", "h"],  # --dp-size is required
    ["probe", "readiness", "--bogus"],
    ["probe", "liveness", "master", "--bogus", "1"],
    ["watch", "-u", "127.0.0.1:1", "--bogus"],
    ["watch", "-i", "1"],  # -u is required
    ["bench", "serve", "--bogus"],
    ["bench", "serve", "--workload", "sharegpt", "--port", "1"],
])
def test_bad_flags_exit_2(tandem, args, tmp_path):
    r = run([tandem, *args], cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip()


# ---------------------------------------------------------------------------- watch + bench


def parse_watch(text):
    """{row name: [5 columns]} of the last report in `text`."""
    reports = [r for r in text.split("# ") if r.strip()]
    rows = {}
    for line in reports[-1].splitlines()[2:]:
        if line.startswith("#") or not line.strip():
            continue
        parts = line.split()
        rows[" ".join(parts[:-5])] = parts[-5:]
    return rows


def pct(x):
    return f"{100 * x:.1f}%"


def test_bench_shared_prefix_and_watch_against_serve(tandem, fixture_dir, tmp_path):
    server = Server(tandem, fixture_dir / "llama.gguf", ["--served-model-name", "m"], tmp_path)
    try:
        result_file = tmp_path / "result.json"
        watch_out = tmp_path / "watch.txt"
        watch = subprocess.Popen([tandem, "watch", "-u", server.url, "-i", "0.5", "-o",
                                  str(watch_out)], stdout=subprocess.DEVNULL)
        r = run([tandem, "bench", "serve", "--base-url", server.url, "--workload",
                 "shared-prefix", "--num-prompts", "12", "--num-prefixes", "2", "--prefix-len",
                 "96", "--input-len", "16", "--output-len", "6", "--max-concurrency", "2",
                 "--goodput", "ttft:60000", "e2el:1", "--seed", "1",
                 "--result-file", str(result_file)], timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        time.sleep(1.2)  # one more watch window after the run
        stop_pid(watch)
        for label in ("Successful requests:", "Mean TTFT (ms):", "P99 TPOT (ms):",
                      "Median ITL (ms):", "P99 E2EL (ms):", "Request goodput (req/s):",
                      "Local hit rate (%):"):
            assert label in r.stdout
        assert "12/12" in r.stderr  # progress
        res = json.loads(result_file.read_text())
        assert res["completed"] == 12 and res["failed"] == 0
        assert res["max_in_flight"] <= 2
        assert res["total_output_tokens"] == sum(res["output_lens"]) > 0
        assert res["total_input_tokens"] == sum(res["input_lens"]) > 12 * 96
        assert res["mean_ttft_ms"] > 0 and res["p99_e2el_ms"] >= res["median_e2el_ms"]
        assert res["request_goodput"] == 0  # nothing finishes in 1 ms
        assert len(res["ttfts"]) == 12 and len(res["itls"]) == 12
        # The groups share their system prompt: the engine's cache hits it.
        queries = server.metric("vllm:prefix_cache_queries_total")
        hits = server.metric("vllm:prefix_cache_hits_total")
        cache = res["prefix_cache"]
        assert cache["local_queries_tokens"] == queries  # only the benchmark ran
        assert cache["local_hits_tokens"] == hits
        assert cache["local_hit_rate"] > 0.4
        assert cache["pool_hit_rate"] is None

        rows = parse_watch(watch_out.read_text())
        engine = f"127.0.0.1:{server.port} engine=0"
        assert rows[engine][1] == pct(hits / queries)  # local_total
        assert rows[engine][4] == pct(hits / queries)  # eff_total with no pool
        assert rows[engine][2] == rows[engine][3] == "-"  # no pool counters
        assert rows["total"] == rows[engine]
        # Some window saw the benchmark's hits.
        wins = [line.split()[2] for line in watch_out.read_text().splitlines()
                if line.startswith(f"127.0.0.1:{server.port} ")]
        assert any(w not in ("-", "0.0%") for w in wins), wins
    finally:
        server.stop()


def test_bench_multi_turn_chat_and_random_with_a_request_rate(tandem, fixture_dir, tmp_path):
    server = Server(tandem, fixture_dir / "llama.gguf", ["--served-model-name", "m"], tmp_path)
    try:
        out = tmp_path / "mt.json"
        r = run([tandem, "bench", "serve", "--port", str(server.port), "--model", "m",
                 "--workload", "multi-turn", "--num-prompts", "8", "--num-turns", "4",
                 "--input-len", "12", "--output-len", "4", "--disable-progress",
                 "--result-file", str(out)], timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        res = json.loads(out.read_text())
        assert res["completed"] == 8 and res["endpoint"] == "/v1/chat/completions"
        assert res["backend"] == "openai-chat"
        # Later turns resend the conversation: the cache hits it.
        assert res["prefix_cache"]["local_hit_rate"] > 0.3
        assert max(res["input_lens"]) > 2 * min(res["input_lens"])

        out = tmp_path / "random.json"
        r = run([tandem, "bench", "serve", "--port", str(server.port),
                 "--num-prompts", "10", "--input-len", "20", "--output-len", "4",
                 "--request-rate", "40", "--seed", "3", "--disable-progress",
                 "--result-file", str(out)], timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        res = json.loads(out.read_text())
        assert res["completed"] == 10 and res["request_rate"] == 40
        assert res["model_id"] == "m"  # from /v1/models
        assert res["prefix_cache"]["local_hit_rate"] < 0.2  # random prompts share nothing
    finally:
        server.stop()


def test_bench_reports_failures(tandem, tmp_path):
    port = free_port()
    r = run([tandem, "bench", "serve", "--port", str(port), "--model", "m",
             "--num-prompts", "3", "--disable-progress"])
    assert r.returncode == 1
    assert "first error:" in r.stderr


class _MetricsHandler(http.server.BaseHTTPRequestHandler):
    body = ""

    def do_GET(self):
        data = type(self).body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_watch_reads_pool_counters_and_engine_labels_from_a_proxy(tandem):
    """A /metrics with two engines and the external (pool) counters, as a proxy shows them."""
    def counters(engine, q, h, eq, eh):
        lab = f'{{engine="{engine}",model_name="m"}}'
        return (f"vllm:prefix_cache_queries_total{lab} {q}\nvllm:prefix_cache_hits_total{lab} {h}\n"
                f"vllm:external_prefix_cache_queries_total{lab} {eq}\n"
                f"vllm:external_prefix_cache_hits_total{lab} {eh}\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _MetricsHandler.body = counters(0, 100, 50, 50, 25) + counters(1, 100, 0, 100, 100)
        proc = subprocess.Popen([tandem, "watch", "-u", f"127.0.0.1:{server.server_port}",
                                 "-i", "1", "-n", "2"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        _MetricsHandler.body = counters(0, 200, 140, 60, 30) + counters(1, 300, 100, 200, 150)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0
        rows = parse_watch(out)
        e0 = rows[f"127.0.0.1:{server.server_port} engine=0"]
        e1 = rows[f"127.0.0.1:{server.server_port} engine=1"]
        # local_win local_total ext_win ext_total eff_total
        assert e0 == [pct(90 / 100), pct(140 / 200), pct(5 / 10), pct(30 / 60), pct(170 / 200)]
        assert e1 == [pct(100 / 200), pct(100 / 300), pct(50 / 100), pct(150 / 200),
                      pct(250 / 300)]
        assert rows["total"] == [pct(190 / 300), pct(240 / 500), pct(55 / 110), pct(180 / 260),
                                 pct(420 / 500)]
    finally:
        server.shutdown()
