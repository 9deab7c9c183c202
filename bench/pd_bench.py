#!/usr/bin/env python3
"""Prefill/decode disaggregation and KV-pool benchmarks on this machine (issues: PD, pool).

Starts every process itself on 127.0.0.1 (free ports), stops them by pid, prints Markdown.

  ttft     TTFT of 2,000-token prompts (distinct, no prefix reuse), streamed:
           1P+1D through `tandem proxy` (P on core 0, D on core 1) vs one colocated engine
           with the prefill resources of P (1 thread, core 0) and with both cores.
  mixed    steady decodes (4 streams of short prompts, 200 tokens each, restarted when
           done) while 2,000-token prompts arrive every --interval seconds: decode ITL and
           per-request TPOT p50/p99 of the steady streams, 1P+1D vs one colocated engine on
           the same two cores.
  pool     TTFT of a 4,000-token prompt: cold, local prefix hit (same engine again), and
           pool hit (a second engine on a second pool worker: remote fetch), with etcd and
           two `tandem pool` workers.

Usage: bench/pd_bench.py [--model models/default.gguf] [--bin build/src/cli/tandem]
                         [--phases ttft mixed pool] [--duration 60] [--interval 8]
Timings only, no assertions (benchmarks live here, not in tests).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


class Proc:
    def __init__(self, cmd, log, env=None, ready_url=None, timeout=120):
        self.log = open(log, "wb")
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        if ready_url:
            deadline = time.time() + timeout
            while time.time() < deadline:
                if self.p.poll() is not None:
                    raise RuntimeError(f"{cmd[:2]} exited: see {log}")
                try:
                    http(ready_url, timeout=2)
                    return
                except Exception:
                    time.sleep(0.2)
            raise RuntimeError(f"{cmd[:2]} not ready: see {log}")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="pd_bench_")
        self.procs = []

    def start(self, name, cmd, ready_path="/health", port=None, env=None, host="127.0.0.1"):
        url = f"http://{host}:{port}{ready_path}" if port else None
        p = Proc(cmd, os.path.join(self.tmp, name + ".log"), env=env, ready_url=url)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            p.stop()
        self.procs = []

    def serve(self, name, cores, threads, extra=(), env=None):
        port = free_port()
        cmd = [self.args.bin, "serve", self.args.model, "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", "default", "--kv-cache-memory", "2GiB", "--threads", str(threads),
               "--cpu-affinity", cores, "--enable-prompt-tokens-details", "--max-model-len", "8192", *extra]
        self.start(name, cmd, port=port, env=env)
        return f"http://127.0.0.1:{port}"

    def pd(self):
        kv_port = free_port()
        p = self.serve("p", "0", 1, ["--kv-transfer-config", json.dumps(
            {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_producer", "kv_port": str(kv_port)})])
        d = self.serve("d", "1", 1, ["--kv-transfer-config", json.dumps(
            {"kv_connector": "MooncakeConnectorV1", "kv_role": "kv_consumer"})])
        port = free_port()
        pp, dp = p.rsplit(":", 1)[1], d.rsplit(":", 1)[1]
        self.start("proxy", [self.args.bin, "proxy", "--host", "127.0.0.1", "--port", str(port),
                             "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", pp,
                             "--decoder-hosts", "127.0.0.1", "--decoder-ports", dp], port=port)
        return f"http://127.0.0.1:{port}", p, d


def prompt_of(url, n_tokens, tag):
    words = " ".join(f"{tag}{i % 97} w{(i * 31) % 1000}" for i in range(n_tokens))
    toks = json.loads(http(url + "/tokenize", {"prompt": words}))["tokens"]
    return json.loads(http(url + "/detokenize", {"tokens": toks[1:n_tokens]}))["prompt"]


def stream(url, prompt, max_tokens, times=None):
    """Streams one completion; returns (ttft_s, token arrival times)."""
    body = json.dumps({"model": "default", "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                       "ignore_eos": True, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.time()
    arrivals = []
    with urllib.request.urlopen(req, timeout=900) as r:
        for line in r:
            if line.startswith(b"data: {"):
                chunk = json.loads(line[6:])
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    arrivals.append(time.time())
    return (arrivals[0] - t0 if arrivals else float("nan")), arrivals


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def phase_ttft(b):
    n = b.args.tokens
    rows = []
    configs = [("colocated, 1 thread (P's resources)", lambda: (b.serve("c1", "0", 1), None, None)),
               ("colocated, 2 threads (both cores)", lambda: (b.serve("c2", "0,1", 2), None, None)),
               ("1P+1D via tandem proxy", b.pd)]
    if b.args.pd_only:
        configs = configs[2:]
    for name, start in configs:
        url, p, d = start()
        tok = p or url  # the proxy has no /tokenize
        stream(url, prompt_of(tok, 64, "warm"), 4)  # warm-up (page-in, threads)
        ttfts = []
        for i in range(b.args.reps):
            ttft, _ = stream(url, prompt_of(tok, n, f"t{i}x"), 8)
            ttfts.append(ttft)
        extra = ""
        if d:
            text = http(d + "/metrics").decode()
            b_bytes = sum(float(l.split()[-1]) for l in text.splitlines()
                          if l.startswith("tandem_kv_transfer_pull_bytes_total"))
            secs = sum(float(l.split()[-1]) for l in text.splitlines()
                       if l.startswith("tandem_kv_transfer_pull_seconds_sum"))
            extra = f"pulled {b_bytes / 1e6:.1f} MB in {secs * 1e3:.0f} ms ({b_bytes / secs / 1e9:.2f} GB/s)" if secs else ""
        rows.append((name, statistics.median(ttfts), min(ttfts), extra))
        b.stop_all()
    print(f"\n### TTFT, {n}-token prompts (median of {b.args.reps}, streamed, 8 output tokens)\n")
    print("| setup | TTFT median (s) | min (s) | vs colocated 1 thread | notes |")
    print("|---|---|---|---|---|")
    for name, med, mn, extra in rows:
        print(f"| {name} | {med:.3f} | {mn:.3f} | {med / rows[0][1]:.3f}x | {extra} |")
    if b.args.pd_only:
        return


def phase_mixed(b):
    results = {}
    for name in ("colocated (2 threads, cores 0-1)", "1P+1D (P core 0, D core 1) via proxy"):
        if name.startswith("colocated"):
            url = tok = b.serve("mixed-c", "0,1", 2)
        else:
            url, tok, _ = b.pd()
        stream(url, prompt_of(tok, 64, "warm"), 4)
        shorts = [prompt_of(tok, 32, f"s{i}q") for i in range(4)]
        longs = [prompt_of(tok, b.args.tokens, f"L{i}z") for i in range(int(b.args.duration / b.args.interval) + 2)]
        stop = time.time() + b.args.duration
        itl, tpot, long_ttft = [], [], []
        lock = threading.Lock()

        def steady(i):
            while time.time() < stop:
                _, arr = stream(url, shorts[i], 200)
                gaps = [y - x for x, y in zip(arr, arr[1:])]
                with lock:
                    itl.extend(gaps)
                    if gaps:
                        tpot.append(sum(gaps) / len(gaps))

        def arrivals():
            k = 0
            while time.time() < stop - 1:
                t_next = time.time() + b.args.interval
                ttft, _ = stream(url, longs[k], 4)
                k += 1
                with lock:
                    long_ttft.append(ttft)
                time.sleep(max(0, t_next - time.time()))

        threads = [threading.Thread(target=steady, args=(i,)) for i in range(4)] + [threading.Thread(target=arrivals)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results[name] = (itl, tpot, long_ttft)
        b.stop_all()
    print(f"\n### Mixed workload: 4 steady decode streams + a {b.args.tokens}-token prompt every {b.args.interval:g} s, "
          f"{b.args.duration:g} s\n")
    print("| setup | decode ITL p50 (ms) | ITL p99 (ms) | TPOT p50 (ms) | TPOT p99 (ms) | long-prompt TTFT median (s) | tokens |")
    print("|---|---|---|---|---|---|---|")
    for name, (itl, tpot, lt) in results.items():
        print(f"| {name} | {pct(itl, 50) * 1e3:.1f} | {pct(itl, 99) * 1e3:.1f} | {pct(tpot, 50) * 1e3:.1f} | "
              f"{pct(tpot, 99) * 1e3:.1f} | {statistics.median(lt) if lt else float('nan'):.2f} | {len(itl)} |")
    names = list(results)
    if len(names) == 2:
        a, c = results[names[0]], results[names[1]]
        print(f"\nPD / colocated: ITL p99 {pct(c[0], 99) / pct(a[0], 99):.3f}x, "
              f"TPOT p99 {pct(c[1], 99) / pct(a[1], 99):.3f}x")


def phase_pool(b):
    etcd_port, peer = free_port(), free_port()
    data = os.path.join(b.tmp, "etcd")
    b.start("etcd", ["etcd", "--name", "n0", "--data-dir", data,
                     "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                     "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                     "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                     "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                     "--initial-cluster", f"n0=http://127.0.0.1:{peer}"], port=etcd_port)
    workers = []
    for i, host in enumerate(("127.0.0.1", "127.0.0.2")):
        port, mport = free_port(), free_port()
        addr = f"{host}:{port}"
        b.start(f"pool{i}", [b.args.bin, "pool", "run", "--worker_address", addr, "--etcd_address",
                             f"127.0.0.1:{etcd_port}", "--shared_memory_size_mb", "1024", "--node_timeout_s", "5",
                             "--node_dead_timeout_s", "10", "--liveness_check_path",
                             os.path.join(b.tmp, f"live{i}"), "--metrics_port", str(mport)],
                ready_path="/metrics", port=mport, host=host)
        workers.append(addr)
    config = json.dumps({"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
                         "kv_connector_extra_config": {"backend": "yuanrong"}})
    a = b.serve("pool-a", "0", 1, ["--kv-transfer-config", config], env={"DS_WORKER_ADDR": workers[0]})
    c = b.serve("pool-b", "1", 1, ["--kv-transfer-config", config], env={"DS_WORKER_ADDR": workers[1]})
    for u in (a, c):
        stream(u, prompt_of(u, 64, "warm"), 4)
    rows = []
    for i in range(b.args.reps):
        prompt = prompt_of(a, b.args.pool_tokens, f"pool{i}y")
        cold, _ = stream(a, prompt, 4)
        local, _ = stream(a, prompt, 4)
        time.sleep(2)  # write-behind saves reach the pool
        pool_hit, _ = stream(c, prompt, 4)
        rows.append((cold, local, pool_hit))
    hits = [l for l in http(c + "/metrics").decode().splitlines() if l.startswith("tandem_pool_connector_blocks_loaded")]
    b.stop_all()
    print(f"\n### TTFT of a {b.args.pool_tokens}-token prompt: cold vs local prefix hit vs pool hit (1 thread each)\n")
    print("| rep | cold (s) | local hit (s) | pool hit, other node (s) | local / cold | pool / cold |")
    print("|---|---|---|---|---|---|")
    for i, (cold, local, ph) in enumerate(rows):
        print(f"| {i} | {cold:.3f} | {local:.3f} | {ph:.3f} | {local / cold:.3f} | {ph / cold:.3f} |")
    print("\nengine B's pool loads: " + "; ".join(hits))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--phases", nargs="+", default=["ttft", "mixed", "pool"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--interval", type=float, default=8)
    ap.add_argument("--pd-only", action="store_true", help="ttft: only the 1P+1D row")
    ap.add_argument("--tokens", type=int, default=2000, help="long-prompt length for ttft and mixed")
    ap.add_argument("--pool-tokens", type=int, default=4000, help="prompt length for the pool phase")
    args = ap.parse_args()
    if not shutil.which("etcd") and "pool" in args.phases:
        sys.exit("etcd not installed (scripts/setup.sh)")
    b = Bench(args)
    print(f"pd_bench: model {args.model}, {os.cpu_count()} cores, logs in {b.tmp}")
    try:
        for ph in args.phases:
            {"ttft": phase_ttft, "mixed": phase_mixed, "pool": phase_pool}[ph](b)
            sys.stdout.flush()
    finally:
        b.stop_all()


if __name__ == "__main__":
    main()
