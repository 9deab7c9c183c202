#!/usr/bin/env python3
"""Soak test: a whole PD cluster (`tandem up`: etcd, a pool worker, a prefiller, a
decoder, the proxy) under a mixed workload through the proxy for a fixed time.

Passes when (1) no request had an unexpected outcome, (2) every process's RSS stayed
flat after warm-up (the largest sample after warm-up is < 10% above the sample at the
end of warm-up), and (3) nothing is held at the end (KV blocks, leases, pool pins,
proxy requests).

The workload, from a seeded generator, on 6 client threads: completions and chat,
streaming and not, prompts sharing long prefixes (prefix-cache and pool hits) and
fresh ones, streams the client drops after the first chunk, requests that must be
rejected (400), and /v1/models, /health, /metrics reads.

    tests/soak/soak.py                      # 10 minutes, fixture model
    tests/soak/soak.py --duration 60        # what ./test.sh runs (tests/test_soak.py)
    tests/soak/soak.py --model models/default.gguf --duration 600

Prints a JSON report; exit status 0 when it passes, 1 when it does not."""
import argparse
import json
import os
import pathlib
import random
import socket
import subprocess
import sys
import threading
import time

import requests

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from tandem_procs import free_port  # noqa: E402

MODEL_NAME = "soak"
RSS_GROWTH_LIMIT = 0.10


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cluster_file(work, model):
    cores = sorted(os.sched_getaffinity(0))
    spec = {
        "name": "soak",
        "run_dir": str(work / "run"),
        "model": str(model),
        "served_model_name": MODEL_NAME,
        "engine_args": ["--enable-prompt-tokens-details", "--max-model-len", "256", "--kv-cache-memory", "64MiB",
                        "--max-num-seqs", "16"],
        "etcd": {"node": "n0", "client_port": free_port(), "peer_port": free_port(), "binary": "/usr/bin/etcd"},
        "pool": {"port": free_port(2), "shared_memory_size_mb": 32, "node_timeout_s": 3, "node_dead_timeout_s": 6},
        "nodes": [{"name": "n0", "host": "127.0.0.1", "engines": [
            {"role": "prefill", "port": free_port(), "kv_port": free_port(), "cpu_affinity": [str(cores[0])],
             "threads": 1},
            {"role": "decode", "port": free_port(), "kv_port": free_port(),
             "cpu_affinity": [str(cores[1 % len(cores)])], "threads": 1},
        ]}],
        "proxy": {"node": "n0", "port": free_port(), "args": ["--health-check-interval", "0.5"]},
    }
    path = work / "cluster.json"
    path.write_text(json.dumps(spec, indent=2))
    return path, spec


class Workload:
    """Client threads issuing a seeded mix of requests; counts outcomes."""

    DOCS = [" ".join(f"d{d}w{(i * 31 + d) % 97}" for i in range(24)) for d in range(6)]

    def __init__(self, url, seed):
        self.url, self.seed = url, seed
        self.lock = threading.Lock()
        self.counts = {}
        self.seconds = {}
        self.local = threading.local()
        self.unexpected = []
        self.stop = threading.Event()

    def note(self, kind, ok, detail=""):
        with self.lock:
            key = kind + (":ok" if ok else ":UNEXPECTED")
            self.counts[key] = self.counts.get(key, 0) + 1
            self.seconds[kind] = self.seconds.get(kind, 0.0) + time.time() - self.local.started
            if not ok and len(self.unexpected) < 20:
                self.unexpected.append(f"{kind}: {detail}"[:400])

    def prompt(self, rng):
        if rng.random() < 0.6:  # a shared document + a question: prefix hits
            return rng.choice(self.DOCS) + f" question {rng.randrange(50)}:"
        return " ".join(f"x{rng.randrange(1000)}" for _ in range(rng.randrange(3, 30)))

    def run(self, threads):
        workers = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(threads)]
        for w in workers:
            w.start()
        return workers

    def client(self, index):
        rng = random.Random(self.seed * 1000 + index)
        while not self.stop.is_set():
            r = rng.random()
            self.local.started = time.time()
            try:
                if r < 0.30:
                    self.completion(rng, stream=False)
                elif r < 0.52:
                    self.completion(rng, stream=True)
                elif r < 0.72:
                    self.chat(rng, stream=rng.random() < 0.5)
                elif r < 0.80:
                    self.dropped_stream(rng)
                elif r < 0.90:
                    self.rejected(rng)
                else:
                    self.reads(rng)
            except requests.RequestException as e:
                self.note("transport", False, repr(e))

    def completion(self, rng, stream):
        max_tokens = rng.randrange(1, 40)
        body = {"model": MODEL_NAME, "prompt": self.prompt(rng), "max_tokens": max_tokens, "ignore_eos": True,
                "temperature": rng.choice([0, 0.7, 1.0]), "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
            text, usage, err = self.read_stream(body, "/v1/completions")
            ok = err is None and usage is not None and usage["completion_tokens"] == max_tokens
            self.note("completion-stream", ok, err or f"usage {usage}")
            return
        r = requests.post(self.url + "/v1/completions", json=body, timeout=120)
        ok = r.status_code == 200 and r.json()["usage"]["completion_tokens"] == max_tokens
        self.note("completion", ok, f"{r.status_code} {r.text[:200]}")

    def chat(self, rng, stream):
        body = {"model": MODEL_NAME, "max_tokens": rng.randrange(1, 30), "temperature": 0.5, "stream": stream,
                "messages": [{"role": "system", "content": "You are terse."},
                             {"role": "user", "content": self.prompt(rng)}]}
        if stream:
            _, _, err = self.read_stream(body, "/v1/chat/completions")
            self.note("chat-stream", err is None, err or "")
            return
        r = requests.post(self.url + "/v1/chat/completions", json=body, timeout=120)
        ok = r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")
        self.note("chat", ok, f"{r.status_code} {r.text[:200]}")

    def read_stream(self, body, path):
        """(text, usage, error) of a streamed request; error None when it ended with [DONE]."""
        text, usage = "", None
        with requests.post(self.url + path, json=body, stream=True, timeout=120) as r:
            if r.status_code != 200:
                return text, usage, f"status {r.status_code}: {r.text[:200]}"
            for line in r.iter_lines():
                if not line.startswith(b"data: "):
                    continue
                if line == b"data: [DONE]":
                    return text, usage, None
                event = json.loads(line[6:])
                if "error" in event:
                    return text, usage, f"error event {event}"
                usage = event.get("usage") or usage
        return text, usage, "stream ended without [DONE]"

    def dropped_stream(self, rng):
        """A client that goes away after the first chunk (expected: nothing leaks)."""
        payload = json.dumps({"model": MODEL_NAME, "prompt": self.prompt(rng), "max_tokens": 120,
                              "ignore_eos": True, "stream": True})
        host, port = self.url.split("//")[1].split(":")
        with socket.create_connection((host, int(port)), timeout=60) as s:
            s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(payload)}\r\n\r\n{payload}").encode())
            got = b""
            while b"data:" not in got:
                data = s.recv(4096)
                if not data:
                    self.note("dropped-stream", False, f"closed before the first chunk: {got[:200]!r}")
                    return
                got += data
        self.note("dropped-stream", got.startswith(b"HTTP/1.1 200"), got[:200].decode(errors="replace"))

    def rejected(self, rng):
        """Requests that must get 400 with an OpenAI error body."""
        case = rng.randrange(4)
        if case == 0:
            body = {"model": MODEL_NAME, "prompt": "x", "max_tokens": -1}
        elif case == 1:
            body = {"model": MODEL_NAME, "prompt": "w " * 1000, "max_tokens": 4}  # > max-model-len
        elif case == 2:
            body = {"model": MODEL_NAME, "messages": "not a list"}
        else:
            body = {"model": MODEL_NAME, "prompt": "x", "temperature": "hot"}
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        r = requests.post(self.url + path, json=body, timeout=60)
        ok = r.status_code == 400 and "message" in r.json().get("error", {})
        self.note("rejected", ok, f"case {case}: {r.status_code} {r.text[:200]}")

    def reads(self, rng):
        path = rng.choice(["/v1/models", "/health", "/metrics"])
        r = requests.get(self.url + path, timeout=30)
        self.note("read" + path, r.status_code == 200, f"{r.status_code} {r.text[:200]}")


def metric(url, name):
    text = requests.get(url + "/metrics", timeout=10).text
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


def held(spec):
    """What is still held across the cluster (all zero when clean)."""
    engines = [f"http://127.0.0.1:{e['port']}" for e in spec["nodes"][0]["engines"]]
    out = {}
    for url in engines:
        for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
                     "tandem_kv_transfer_leases"):
            out[f"{url} {name}"] = metric(url, name) or 0.0
    pool_metrics = f"http://127.0.0.1:{spec['pool']['port'] + 1}"
    out["pool tandem_pool_pinned_objects"] = metric(pool_metrics, "tandem_pool_pinned_objects") or 0.0
    proxy = f"http://127.0.0.1:{spec['proxy']['port']}"
    out["proxy request_num"] = requests.get(proxy + "/health", timeout=10).json()["request_num"]
    return out


def soak(tandem_bin, model, duration, work, seed=1, threads=6, log=print):
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    path, spec = cluster_file(work, model)
    up = subprocess.Popen([tandem_bin, "up", str(path), "--stop-timeout", "10"],
                          stdout=open(work / "up.out", "wb"), stderr=open(work / "up.err", "wb"))
    state_path = work / "run" / "n0" / "state.json"
    report = {"duration_s": duration, "model": str(model), "threads": threads}
    try:
        deadline = time.time() + 120
        state = None
        while time.time() < deadline and up.poll() is None:
            try:
                state = json.loads(state_path.read_text())
                if state["status"] == "ready":
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.2)
        if state is None or state.get("status") != "ready":
            raise RuntimeError("cluster not ready: " + (work / "up.err").read_text(errors="replace")[-2000:])
        pids = {s["name"]: s["pid"] for s in state["services"]}
        url = state["proxy_url"]
        load = Workload(url, seed)
        workers = load.run(threads)
        warmup = max(10.0, 0.25 * duration)
        start = time.time()
        samples = {name: [] for name in pids}
        while time.time() - start < duration:
            t = time.time() - start
            for name, pid in pids.items():
                samples[name].append((round(t, 1), rss_kib(pid)))
            time.sleep(min(2.0, max(0.5, duration / 120)))
        load.stop.set()
        for w in workers:
            w.join(150)
        rss = {}
        for name, series in samples.items():
            before = [kib for t, kib in series if t <= warmup]
            after = [kib for t, kib in series if t > warmup]
            base = before[-1] if before else series[0][1]
            peak = max(after) if after else base
            rss[name] = {"start_kib": series[0][1], "after_warmup_kib": base, "peak_after_kib": peak,
                         "growth": round((peak - base) / base, 4) if base else 0.0,
                         "samples_kib": [kib for _, kib in series]}
        report["rss"] = rss
        report["requests"] = dict(sorted(load.counts.items()))
        report["mean_seconds"] = {k: round(v / sum(n for c, n in load.counts.items() if c.split(":")[0] == k), 4)
                                  for k, v in sorted(load.seconds.items())}
        report["unexpected"] = load.unexpected
        still = {}
        end = time.time() + 15
        while time.time() < end:
            still = {k: v for k, v in held(spec).items() if v}
            if not still:
                break
            time.sleep(0.2)
        report["held_at_end"] = still
        failures = []
        if load.unexpected:
            failures.append(f"{sum(v for k, v in load.counts.items() if 'UNEXPECTED' in k)} unexpected outcomes")
        for name, r in rss.items():
            if r["growth"] >= RSS_GROWTH_LIMIT:
                failures.append(f"{name} RSS grew {100 * r['growth']:.1f}% after warm-up")
        if still:
            failures.append(f"still held at the end: {still}")
        if sum(v for k, v in load.counts.items() if k.endswith(":ok")) < duration:
            failures.append("fewer than one request per second completed")
        report["failures"] = failures
        report["passed"] = not failures
        return report
    finally:
        subprocess.run([tandem_bin, "down", str(path), "--timeout", "10"], capture_output=True, timeout=120)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    ap.add_argument("--model", default=None, help="GGUF (default: the llama fixture of $TANDEM_FIXTURE_DIR)")
    ap.add_argument("--tandem", default=os.environ.get("TANDEM_BIN", str(ROOT / "build" / "src" / "cli" / "tandem")))
    ap.add_argument("--work", default=None, help="directory for the cluster's files (default: a temp dir)")
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    model = args.model or pathlib.Path(os.environ.get("TANDEM_FIXTURE_DIR", ROOT / "build" / "fixtures")) / "llama.gguf"
    if not pathlib.Path(model).exists():
        print(f"soak: model {model} not found", file=sys.stderr)
        return 2
    import tempfile
    work = args.work or tempfile.mkdtemp(prefix="tandem-soak-")
    report = soak(args.tandem, model, args.duration, work, args.seed, args.threads)
    print(json.dumps(report, indent=2))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
