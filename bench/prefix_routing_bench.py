#!/usr/bin/env python3
"""Cache-aware routing benchmark (issue 19): multi-turn chat through `tandem proxy` in front
of two `tandem serve` workers (one core each, KV events on), with --routing-policy
prefix_aware vs round_robin vs least_load, interleaved (A B C A B C ...).

Each run starts a fresh proxy with the policy, empties both engines' prefix caches
(POST /reset_prefix_cache; the engines announce AllBlocksCleared) and runs
`tandem bench serve --workload multi-turn` through the proxy. Prints a Markdown table
(per run, then the median per policy) with TTFT p50/p90, output throughput, the prefix
hit rate (the engines' cached_tokens / prompt_tokens, as the client saw them) and the
proxy's routing decisions.

Usage: bench/prefix_routing_bench.py [--model models/default.gguf] [--bin build/src/cli/tandem]
         [--reps 2] [--sessions 8] [--turns 4] [--input-len 96] [--output-len 32]
         [--prefix-len 192] [--think-time 0.5] [--max-concurrency 0] [--kv-cache-memory 1GiB]
Starts every process itself on 127.0.0.1 (free ports) and stops them by pid. Timings only.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["prefix_aware", "round_robin", "least_load"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


class Proc:
    def __init__(self, cmd, log, ready_url, timeout=120):
        self.log = open(log, "wb")
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
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


def metric_sums(url, name):
    """{reason: value} of `name`'s series (by their reason label), from /metrics."""
    text = http(url + "/metrics").decode()
    out = {}
    for labels, value in re.findall(r"^" + re.escape(name) + r"\{([^}]*)\} (\S+)$", text, re.M):
        reason = dict(re.findall(r'(\w+)="([^"]*)"', labels)).get("reason", "")
        out[reason] = out.get(reason, 0) + float(value)
    return out


def metric_value(url, name):
    """The value of the label-less series `name` (0 when absent)."""
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", http(url + "/metrics").decode(), re.M)
    return float(m.group(1)) if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--input-len", type=int, default=96)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--prefix-len", type=int, default=192)
    ap.add_argument("--think-time", type=float, default=0.5)
    ap.add_argument("--max-concurrency", type=int, default=0)
    ap.add_argument("--kv-cache-memory", default="1GiB",
                    help="each worker's KV budget; smaller than the sessions' working set puts the caches "
                         "under pressure, where keeping a session on one worker matters most")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="prefix_routing_bench_")
    workers, procs = [], []
    try:
        for core in (0, 1):
            port, events = free_port(), free_port()
            config = {"enable_kv_cache_events": True, "publisher": "zmq",
                      "endpoint": f"tcp://*:{events}", "topic": "kv-events"}
            cmd = [args.bin, "serve", args.model, "--host", "127.0.0.1", "--port", str(port),
                   "--served-model-name", "default", "--kv-cache-memory", args.kv_cache_memory, "--threads", "1",
                   "--cpu-affinity", str(core), "--enable-prompt-tokens-details",
                   "--max-model-len", "8192", "--kv-events-config", json.dumps(config)]
            procs.append(Proc(cmd, os.path.join(tmp, f"worker{core}.log"), f"http://127.0.0.1:{port}/health"))
            workers.append((f"http://127.0.0.1:{port}", f"tcp://127.0.0.1:{events}"))
        rows = []
        for rep in range(args.reps):
            for policy in POLICIES:
                for url, _ in workers:
                    http(url + "/reset_prefix_cache", {})
                port = free_port()
                proxy = Proc([args.bin, "proxy", "--host", "127.0.0.1", "--port", str(port),
                              "--worker-urls", *[u for u, _ in workers], "--routing-policy", policy,
                              "--kv-events-endpoints", *[e for _, e in workers],
                              "--kv-events-topic", "kv-events"],
                             os.path.join(tmp, f"proxy-{policy}-{rep}.log"), f"http://127.0.0.1:{port}/health")
                time.sleep(0.5)  # the SUB sockets join their publishers
                result = os.path.join(tmp, f"{policy}-{rep}.json")
                bench = [args.bin, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
                         "--model", "default", "--workload", "multi-turn",
                         "--num-prompts", str(args.sessions * args.turns), "--num-turns", str(args.turns),
                         "--input-len", str(args.input_len), "--output-len", str(args.output_len),
                         "--prefix-len", str(args.prefix_len), "--think-time", str(args.think_time),
                         "--max-concurrency", str(args.max_concurrency), "--seed", str(rep),
                         "--tokenizer-url", workers[0][0], "--ignore-eos", "--disable-progress",
                         "--result-file", result]
                subprocess.run(bench, check=True, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(tmp, f"bench-{policy}-{rep}.log"), "wb"))
                purl = f"http://127.0.0.1:{port}"
                decisions = metric_sums(purl, "tandem_proxy_routing_decisions_total")
                predicted = metric_value(purl, "tandem_proxy_prefix_predicted_cached_tokens_total")
                reported = metric_value(purl, "tandem_proxy_prefix_reported_cached_tokens_total")
                proxy.stop()
                r = json.load(open(result))
                rows.append({"policy": policy, "rep": rep, "ttft_p50": r["median_ttft_ms"],
                             "ttft_p90": r["p90_ttft_ms"], "tput": r["output_throughput"],
                             "hit": r["prefix_hit_rate"] or 0.0, "failed": r["failed"],
                             "decisions": {k: int(v) for k, v in decisions.items() if v},
                             "predicted": int(predicted), "reported": int(reported)})
                print(f"# {policy} rep {rep}: {rows[-1]}", flush=True)
        print("\n| policy | rep | TTFT p50 (ms) | TTFT p90 (ms) | output tok/s | prefix hit rate | failed "
              "| routing decisions | predicted / reported cached tokens |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['policy']} | {r['rep']} | {r['ttft_p50']:.0f} | {r['ttft_p90']:.0f} | {r['tput']:.2f} | "
                  f"{100 * r['hit']:.1f}% | {r['failed']} | {r['decisions']} | "
                  f"{r['predicted']} / {r['reported']} |")
        print("\n| policy | TTFT p50 (ms) | TTFT p90 (ms) | output tok/s | prefix hit rate |")
        print("|---|---|---|---|---|")
        for policy in POLICIES:
            sel = [r for r in rows if r["policy"] == policy]
            med = lambda k: statistics.median(r[k] for r in sel)
            print(f"| {policy} | {med('ttft_p50'):.0f} | {med('ttft_p90'):.0f} | {med('tput'):.2f} | "
                  f"{100 * med('hit'):.1f}% |")
        print(f"\nlogs in {tmp}")
    finally:
        for p in reversed(procs):
            p.stop()


if __name__ == "__main__":
    main()
