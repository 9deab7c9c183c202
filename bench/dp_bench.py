#!/usr/bin/env python3
"""Data-parallel serving vs one engine on this machine (issue 22, DP half).

A: `tandem serve --data-parallel-size 2 --cpu-affinity 0,1`: the DP front end with two
   ranks, one thread each, pinned to cores 0 and 1.
B: `tandem serve --threads 2 --cpu-affinity 0,1`: one engine with two compute threads on
   the same two cores.
Both servers stay up (same model, same flags otherwise); only one is benchmarked at a
time, interleaved A B A B. Each run is `tandem bench serve --workload random` at
--max-concurrency 16 (EOS ignored, greedy), round k with --seed k for both servers (new
prompts each round, so no run hits the prefix cache of an earlier one). Prints a Markdown table: total output tok/s
and TTFT p50 of every run, the ratio A/B of each pair and of the medians.

Usage: bench/dp_bench.py [--model models/default.gguf] [--bin build/src/cli/tandem]
           [--reps 3] [--num-prompts 48] [--input-len 128] [--output-len 64]
Timings only, no assertions.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port(n=1):
    """The first of n consecutive free ports."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + n > 65535:
            continue
        try:
            socks = []
            for p in range(port, port + n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    sys.exit("no free ports")


def wait_until(check, what, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.3)
    sys.exit(f"{what} did not start")


class Server:
    def __init__(self, binary, model, extra, log, rpc_port=None):
        self.port = free_port(4)  # the DP ranks listen on port + 1 + rank
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.p = subprocess.Popen([binary, "serve", model, "--port", str(self.port), "--served-model-name", "m",
                                   "--max-model-len", "2048", "--kv-cache-memory", "512MiB", *extra],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: urllib.request.urlopen(self.url + "/health", timeout=2).status == 200, log)
        if rpc_port:  # every rank up
            def ranks_up():
                body = json.load(urllib.request.urlopen(f"http://127.0.0.1:{rpc_port}/dp/ranks", timeout=2))
                return sum(r["state"] == "up" for r in body["ranks"]) == body["size"]
            wait_until(ranks_up, log)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def run_bench(binary, server, args, tmp, seed):
    out = os.path.join(tmp, f"r{time.time_ns()}.json")
    cmd = [binary, "bench", "serve", "--base-url", server.url, "--model", "m", "--workload", "random",
           "--num-prompts", str(args.num_prompts), "--max-concurrency", "16", "--input-len", str(args.input_len),
           "--output-len", str(args.output_len), "--ignore-eos", "--temperature", "0", "--seed", str(seed),
           "--disable-progress", "--result-file", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    return r["output_throughput"], r["median_ttft_ms"], r.get("failed", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--num-prompts", type=int, default=48)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dp_bench_")
    rpc = free_port(2)
    dp = Server(args.bin, args.model, ["--data-parallel-size", "2", "--cpu-affinity", "0,1",
                                       "--data-parallel-rpc-port", str(rpc)], os.path.join(tmp, "dp.log"), rpc)
    one = Server(args.bin, args.model, ["--threads", "2", "--cpu-affinity", "0,1"], os.path.join(tmp, "one.log"))
    rows, a_tput, b_tput = [], [], []
    try:
        for rep in range(args.reps):
            for name, server, acc in (("A: 2 DP ranks x 1 thread", dp, a_tput), ("B: 1 engine x 2 threads", one, b_tput)):
                # A new seed per round (new prompts: no prefix-cache hits), the same for A and B.
                tput, ttft, failed = run_bench(args.bin, server, args, tmp, seed=rep + 1)
                acc.append(tput)
                rows.append((rep + 1, name, tput, ttft, failed))
    finally:
        dp.stop()
        one.stop()
    print(f"random workload, input {args.input_len}, output {args.output_len} tokens, "
          f"{args.num_prompts} prompts, concurrency 16; logs in {tmp}\n")
    print("| round | server | output tok/s | TTFT p50 (ms) | failed |")
    print("|---|---|---|---|---|")
    for rep, name, tput, ttft, failed in rows:
        print(f"| {rep} | {name} | {tput:.1f} | {ttft:.0f} | {failed} |")
    print()
    for i, (a, b) in enumerate(zip(a_tput, b_tput)):
        print(f"round {i + 1}: A/B output tok/s = {a / b:.2f}")
    print(f"median A/B = {statistics.median(a_tput) / statistics.median(b_tput):.2f}")


if __name__ == "__main__":
    sys.exit(main())
