"""`tandem up` / `tandem down` with real processes on 127.0.0.1: etcd, a pool worker, a
prefill and a decode engine (fixture model) and the proxy, from a generated cluster file
(the shape of deploy/local.json, on free ports). Every process is checked by pid; nothing
is ever stopped by name."""
import json
import shlex
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from tandem_procs import free_port

ETCD = "/usr/bin/etcd"
MODEL_NAME = "fixture"


def free_port_pair():
    """A free port whose successor is free too (the pool worker's /metrics is port + 1)."""
    return free_port(2)


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_for(predicate, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def cores():
    available = sorted(os.sched_getaffinity(0))
    return str(available[0]), str(available[1 % len(available)])


def make_cluster(tmp_path, fixture_dir, pool=True, model=None, **overrides):
    """A cluster file like deploy/local.json on free ports; returns (path, spec)."""
    p_core, d_core = cores()
    spec = {
        "name": "test",
        "run_dir": str(tmp_path / "run"),
        "model": str(model or fixture_dir / "llama.gguf"),
        "served_model_name": MODEL_NAME,
        "engine_args": ["--enable-prompt-tokens-details", "--max-model-len", "256", "--kv-cache-memory", "64MiB"],
        "etcd": {"node": "n0", "client_port": free_port(), "peer_port": free_port(), "binary": ETCD},
        "nodes": [{"name": "n0", "host": "127.0.0.1", "engines": [
            {"role": "prefill", "port": free_port(), "kv_port": free_port(), "cpu_affinity": [p_core], "threads": 1},
            {"role": "decode", "port": free_port(), "kv_port": free_port(), "cpu_affinity": [d_core], "threads": 1},
        ]}],
        "proxy": {"node": "n0", "port": free_port(), "args": ["--health-check-interval", "0.2"]},
    }
    if pool:
        spec["pool"] = {"port": free_port_pair(), "shared_memory_size_mb": 32, "node_timeout_s": 3,
                        "node_dead_timeout_s": 6}
    spec.update(overrides)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(spec, indent=2))
    return path, spec


class Up:
    """A foreground `tandem up` of a cluster file, its output in files."""

    def __init__(self, tandem_bin, path, tmp_path, extra=()):
        self.path = path
        self.state_path = tmp_path / "run" / "n0" / "state.json"
        self.out_path, self.err_path = tmp_path / "up.out", tmp_path / "up.err"
        self.proc = subprocess.Popen([tandem_bin, "up", str(path), "--stop-timeout", "10", *extra],
                                     stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"))

    def state(self):
        try:
            return json.loads(self.state_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def wait_ready(self, timeout=90):
        def ready():
            st = self.state()
            return self.proc.poll() is not None or (st is not None and st["status"] == "ready")
        assert wait_for(ready, timeout), "not ready in time:\n" + self.output()
        assert self.proc.poll() is None, f"tandem up exited {self.proc.returncode}:\n" + self.output()
        return self.state()

    def output(self):
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def pids(self):
        st = self.state()
        return [self.proc.pid] + [s["pid"] for s in st["services"]]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def cleanup(tandem_bin):
    """Runs `tandem down` on every cluster file a test registers, whatever happened."""
    files = []
    yield files.append
    for path in files:
        subprocess.run([tandem_bin, "down", str(path), "--timeout", "5"], capture_output=True, timeout=60)


def complete(url, prompt="The capital of France is", max_tokens=8):
    r = requests.post(url + "/v1/completions", timeout=60, json={
        "model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


def test_up_serves_through_the_proxy_and_down_stops_every_pid(tandem_bin, fixture_dir, tmp_path, cleanup):
    path, spec = make_cluster(tmp_path, fixture_dir)
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    state = up.wait_ready()
    assert [s["name"] for s in state["services"]] == ["etcd", "pool", "prefill", "decode", "proxy"]
    assert state["proxy_url"] == f"http://127.0.0.1:{spec['proxy']['port']}"
    pids = up.pids()
    assert all(alive(p) for p in pids)
    # One log file per service.
    for s in state["services"]:
        assert os.path.exists(s["log"]), s

    proxy = state["proxy_url"]
    health = requests.get(proxy + "/health", timeout=10).json()
    assert health["status"] == "ok"
    body = complete(proxy)
    assert body["choices"][0]["text"]
    assert body["usage"]["completion_tokens"] > 0
    # The pool worker registered in etcd; the engines were told where it is.
    etcd_health = requests.get(f"http://127.0.0.1:{spec['etcd']['client_port']}/health", timeout=5).json()
    assert etcd_health["health"] == "true"
    assert "DS_WORKER_ADDR" in open(f"/proc/{state['services'][2]['pid']}/environ").read()
    # The summary is printed right after the state file says "ready".
    assert wait_for(lambda: "Stop: Ctrl-C, or " in up.out_path.read_text(), 10), up.output()
    out = up.out_path.read_text()
    assert "curl " + proxy + "/v1/chat/completions" in out and " down " + str(path) in out

    # A second tandem up of the same node refuses.
    again = subprocess.run([tandem_bin, "up", str(path)], capture_output=True, text=True, timeout=30)
    assert again.returncode == 1
    assert "already up" in again.stderr

    down = subprocess.run([tandem_bin, "down", str(path)], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    assert up.proc.wait(timeout=30) == 0, up.output()
    for pid in pids:
        assert not alive(pid), pid
    assert not up.state_path.exists()
    # Nothing listens any more.
    for port in (spec["proxy"]["port"], spec["etcd"]["client_port"], spec["pool"]["port"]):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    # Down again: nothing to stop.
    down = subprocess.run([tandem_bin, "down", str(path)], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and "nothing to stop" in down.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_up_stops_everything(tandem_bin, fixture_dir, tmp_path, cleanup, sig):
    path, _ = make_cluster(tmp_path, fixture_dir, pool=False)
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    state = up.wait_ready()
    assert [s["name"] for s in state["services"]] == ["etcd", "prefill", "decode", "proxy"]
    complete(state["proxy_url"])
    pids = up.pids()
    up.proc.send_signal(sig)  # SIGINT: Ctrl-C in the terminal of ./run.sh
    assert up.proc.wait(timeout=30) == 0, up.output()
    assert wait_for(lambda: not any(alive(p) for p in pids), 5), [p for p in pids if alive(p)]
    assert not up.state_path.exists()


def test_a_service_that_dies_stops_the_rest_and_up_fails(tandem_bin, fixture_dir, tmp_path, cleanup):
    path, _ = make_cluster(tmp_path, fixture_dir)
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    state = up.wait_ready()
    pids = up.pids()
    decode = next(s for s in state["services"] if s["name"] == "decode")
    os.kill(decode["pid"], signal.SIGKILL)
    code = up.proc.wait(timeout=30)
    assert code != 0
    assert "decode" in up.output() and "killed" in up.output()
    assert wait_for(lambda: not any(alive(p) for p in pids), 5), [p for p in pids if alive(p)]


def test_services_end_with_a_killed_up(tandem_bin, fixture_dir, tmp_path, cleanup):
    path, _ = make_cluster(tmp_path, fixture_dir)
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    up.wait_ready()
    pids = up.pids()[1:]
    up.kill()  # SIGKILL: it cannot stop them, but they are told (parent-death signal)
    assert wait_for(lambda: not any(alive(p) for p in pids), 15), [p for p in pids if alive(p)]
    assert up.state_path.exists()  # stale: names only ended processes
    down = subprocess.run([tandem_bin, "down", str(path)], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0 and "nothing runs" in down.stdout, down.stdout + down.stderr
    assert not up.state_path.exists()


def start_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_down_stops_exactly_the_pids_of_the_state_file(tandem_bin, fixture_dir, tmp_path):
    """tandem up is gone (a dead pid); its services still run in their own process groups.
    tandem down stops them, and not a process whose pid matches but whose start time does
    not (a recycled pid)."""
    path, _ = make_cluster(tmp_path, fixture_dir, pool=False)
    services = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    decoy = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        state = {"cluster": "test", "node": "n0", "status": "ready", "logs_dir": str(tmp_path),
                 "proxy_url": "", "supervisor": {"pid": dead.pid, "start_ticks": 1},
                 "services": [{"name": f"s{i}", "kind": "engine", "pid": p.pid, "start_ticks": start_ticks(p.pid),
                               "ports": {}, "log": ""} for i, p in enumerate(services)] +
                             [{"name": "decoy", "kind": "engine", "pid": decoy.pid,
                               "start_ticks": start_ticks(decoy.pid) + 1, "ports": {}, "log": ""}]}
        state_path = tmp_path / "run" / "n0" / "state.json"
        state_path.parent.mkdir(parents=True)
        state_path.write_text(json.dumps(state))
        refused = subprocess.run([tandem_bin, "up", str(path)], capture_output=True, text=True, timeout=30)
        assert refused.returncode == 1 and "still run (s0 pid" in refused.stderr, refused.stderr
        down = subprocess.run([tandem_bin, "down", str(path), "--timeout", "10"], capture_output=True, text=True,
                              timeout=60)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "tandem up is gone" in down.stdout
        for p in services:
            assert p.wait(timeout=10) == -signal.SIGTERM
        assert decoy.poll() is None  # not ours: untouched
        assert not state_path.exists()
    finally:
        for p in services + [decoy]:
            p.kill()
            p.wait()


def test_a_port_in_use_is_reported_before_anything_starts(tandem_bin, fixture_dir, tmp_path):
    path, spec = make_cluster(tmp_path, fixture_dir)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", spec["proxy"]["port"]))
        busy.listen()
        r = subprocess.run([tandem_bin, "up", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert f"proxy: cannot listen on 127.0.0.1:{spec['proxy']['port']} (http port)" in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()


def test_detach_returns_when_ready(tandem_bin, fixture_dir, tmp_path, cleanup):
    path, _ = make_cluster(tmp_path, fixture_dir, pool=False)
    cleanup(path)
    r = subprocess.run([tandem_bin, "up", "--detach", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "is up" in r.stdout
    state = json.loads((tmp_path / "run" / "n0" / "state.json").read_text())
    assert state["status"] == "ready"
    complete(state["proxy_url"])
    pids = [state["supervisor"]["pid"]] + [s["pid"] for s in state["services"]]
    down = subprocess.run([tandem_bin, "down", str(path)], capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stdout + down.stderr
    for pid in pids:
        assert not alive(pid), pid
    assert os.path.exists(tmp_path / "run" / "n0" / "logs" / "up.log")


def test_an_engine_that_cannot_start_fails_up_with_its_log(tandem_bin, fixture_dir, tmp_path, cleanup):
    missing = tmp_path / "missing.gguf"
    path, _ = make_cluster(tmp_path, fixture_dir, pool=False, model=missing)
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    code = up.proc.wait(timeout=60)
    assert code != 0
    out = up.output()
    assert "last lines of" in out and "missing.gguf" in out, out
    assert not up.state_path.exists()


@pytest.mark.parametrize("mutate, field", [
    (lambda s: s["nodes"][0]["engines"][1].update(role="both"), "nodes[0].engines[1].role"),
    (lambda s: s["proxy"].update(port=70000), "proxy.port"),
    (lambda s: s["nodes"][0].update(engins=[]), "nodes[0].engins: unknown field"),
    (lambda s: s["etcd"].update(node="n9"), "etcd.node"),
    (lambda s: s.pop("nodes"), "nodes: required field missing"),
])
def test_bad_cluster_file_exits_2_naming_the_field(tandem_bin, fixture_dir, tmp_path, mutate, field):
    path, spec = make_cluster(tmp_path, fixture_dir)
    mutate(spec)
    path.write_text(json.dumps(spec))
    for cmd in ("up", "down"):
        r = subprocess.run([tandem_bin, cmd, str(path)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert field in r.stderr and str(path) in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()  # nothing was started


def test_bad_invocations_exit_2(tandem_bin, fixture_dir, tmp_path):
    path, _ = make_cluster(tmp_path, fixture_dir)
    path.with_name("broken.json").write_text('{"nodes": [')
    cases = [
        ([str(tmp_path / "nope.json")], "cannot read the cluster file"),
        ([str(path.with_name("broken.json"))], "not valid JSON"),
        ([str(path), "--node", "n9"], 'no node named "n9"'),
        ([str(path), "--bogus"], "--bogus"),
    ]
    for args, message in cases:
        r = subprocess.run([tandem_bin, "up", *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)


def test_dry_run_prints_the_command_lines(tandem_bin, fixture_dir, tmp_path):
    path, spec = make_cluster(tmp_path, fixture_dir)
    r = subprocess.run([tandem_bin, "up", "--dry-run", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if not l.startswith("#")]
    assert len(lines) == 5
    assert lines[0].startswith(ETCD + " --name n0")
    assert " pool run --worker_address 127.0.0.1:%d" % spec["pool"]["port"] in lines[1]
    assert lines[2].startswith("DS_WORKER_ADDR=127.0.0.1:%d " % spec["pool"]["port"])
    assert "--cpu-affinity" in lines[2] and "MultiConnector" in lines[2]
    assert " proxy --host 127.0.0.1" in lines[4]
    assert not (tmp_path / "run").exists()


def test_shipped_local_cluster_file_plans(tandem_bin):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([tandem_bin, "up", "--dry-run", "deploy/local.json"], capture_output=True, text=True,
                       timeout=30, cwd=root)
    assert r.returncode == 0, r.stderr
    assert "--port 8000" in r.stdout and "--cpu-affinity 0 --threads 1" in r.stdout
    assert "--cpu-affinity 1 --threads 1" in r.stdout
    r = subprocess.run([tandem_bin, "up", "--dry-run", "--node", "node5", "deploy/a2-8node.json"],
                       capture_output=True, text=True, timeout=30, cwd=root)
    assert r.returncode == 0, r.stderr
    assert "wait for etcd on node0" in r.stdout


@pytest.mark.parametrize("node", ["node0", "node5"])
def test_seed_layout_engine_command_lines_serve(tandem_bin, fixture_dir, tmp_path, node):
    """The engine command lines planned for seed 000's 8-node layout (every seed flag) start
    `tandem serve`, here with the fixture model on free local ports."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([tandem_bin, "up", "--dry-run", "--node", node, "deploy/a2-8node.json"],
                         capture_output=True, text=True, timeout=30, cwd=root).stdout
    line = next(l for l in out.splitlines() if " serve " in l)
    argv = shlex.split(line)
    env = dict(os.environ)
    while not argv[0].startswith("/") and "=" in argv[0]:
        key, value = argv.pop(0).split("=", 1)
        assert key == "DS_WORKER_ADDR"
    argv[0] = tandem_bin
    # A GLM-shaped fixture: the deployment's MTP speculation (docs/DEPLOY.md) needs the model's NextN layers.
    argv[argv.index("serve") + 1] = str(fixture_dir / "glm4moe-q4_k_m.gguf")
    port = free_port()
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    argv[argv.index("--max-model-len") + 1] = "256"
    # With --enable-expert-parallel the seed's ranks form one group (each waits for the
    # others at rank 0's address); alone on this host the line runs as a one-rank group.
    # Groups of 2 and 4 ranks: tests/test_expert_parallel.py.
    argv[argv.index("--data-parallel-size") + 1] = "1"
    argv[argv.index("--data-parallel-rank") + 1] = "0"
    kv = argv.index("--kv-transfer-config") + 1
    config = json.loads(argv[kv])
    config["kv_connector_extra_config"]["connectors"][0]["kv_port"] = str(free_port())
    argv[kv] = json.dumps(config)
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(argv + ["--kv-cache-memory", "64MiB"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        def healthy():
            try:
                return requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
            except requests.RequestException:
                return proc.poll() is not None
        assert wait_for(healthy, 30) and proc.poll() is None, (tmp_path / "serve.log").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_the_seed_probe_scripts_pass_against_the_cluster(tandem_bin, fixture_dir, tmp_path, cleanup):
    """The seed's own vllm_probe.py, vllm_probe_yr.py, etcd_liveness_check.sh and
    yr_liveness_check.sh (tests/data/seed_scripts; only host, ports and paths changed)
    against a `tandem up` cluster: the proxy as the entry point, its etcd and pool worker."""
    from test_ops import seed_scripts
    live = tmp_path / "liveness"
    path, spec = make_cluster(tmp_path, fixture_dir, served_model_name="glm5")
    spec["pool"]["liveness_check_path"] = str(live)
    path.write_text(json.dumps(spec, indent=2))
    cleanup(path)
    up = Up(tandem_bin, path, tmp_path)
    up.wait_ready()
    etcd = f"127.0.0.1:{spec['etcd']['client_port']}"
    seed_dir, seed_log = seed_scripts(tmp_path, spec["proxy"]["port"], spec["etcd"]["client_port"], str(live))
    env = dict(os.environ, WORKER_LOG_DIR=str(tmp_path))

    def run(cmd):
        return subprocess.run(cmd, cwd=seed_dir, env=env, capture_output=True, text=True, timeout=60)

    r = run([sys.executable, "vllm_probe.py"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run([sys.executable, "vllm_probe_yr.py", "master"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(["bash", "./etcd_liveness_check.sh", etcd])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(["bash", "./yr_liveness_check.sh", "-f", str(live), "-t", "30"])
    assert r.returncode == 0, r.stdout + r.stderr
    ours = subprocess.run([tandem_bin, "probe", "readiness", "--host", "127.0.0.1", "--port",
                           str(spec["proxy"]["port"]), "--log-file", str(tmp_path / "probe.log")],
                          capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0, ours.stdout + ours.stderr
