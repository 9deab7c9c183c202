#!/usr/bin/env python3
"""Expert parallelism on this machine (issue: data parallel and expert parallel). A MoE
fixture served by one rank holding every expert (--threads 2) vs two expert-parallel
ranks (--data-parallel-size 2 --enable-expert-parallel, one thread and one core each),
interleaved A B A B. The one rank gets one `tandem bench serve` at concurrency C; the two
ranks get one client each at C/2 (each rank is its own API server, vllm-ascend's
launch_online_dp.py layout), started together. Prints per run: total output tok/s (all
tokens / the longest client's duration), TTFT p50, and for the EP ranks the all-to-all
share of the run (tandem_expert_parallel_exchange_seconds / duration, waiting for the
other rank included), the bytes each rank sent per token per MoE layer, and the
all-to-all seconds per token per MoE layer. Then memory: the model file's resident
pages in each process (what it touched) and the trunk's expert bytes.

Usage: bench/expert_parallel_bench.py [--model build/fixtures/glm4moe-q4_k_m.gguf]
           [--bin build/src/cli/tandem] [--reps 2] [--concurrency 16] [--num-prompts 32]
           [--input-len 64] [--output-len 64]
Timings only, no assertions.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERIES = {"exchange": "tandem_expert_parallel_exchange_seconds_total",
          "bytes": "tandem_expert_parallel_bytes_sent_total",
          "prompt": "vllm:prompt_tokens_total", "gen": "vllm:generation_tokens_total",
          "steps": "tandem_expert_parallel_steps_total", "idle": "tandem_expert_parallel_idle_steps_total"}


def free_port(n=1):
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + n < 65000 and all(port_free(p + i) for i in range(n)):
            return p


def port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for key, name in SERIES.items():
        out[key] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith(name + "{") or line.startswith(name + " "))
    return out


def mapping_rss_kib(pid, path):
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                inside = line.rstrip().endswith(path)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


class Server:
    def __init__(self, binary, model, extra, log, wait=True):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.p = subprocess.Popen([binary, "serve", model, "--port", str(self.port), "--served-model-name", "m",
                                   "--max-model-len", "1024", "--kv-cache-memory", "512MiB", *extra],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self.wait()

    def wait(self):
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.p.poll() is not None:
                sys.exit(f"tandem serve exited; see {self.log.name}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2)
                return
            except Exception:
                time.sleep(0.3)
        sys.exit("tandem serve did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def bench_cmd(binary, server, concurrency, prompts, seed, args, out):
    return [binary, "bench", "serve", "--base-url", server.url, "--model", "m", "--workload", "random",
            "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--input-len", str(args.input_len),
            "--output-len", str(args.output_len), "--ignore-eos", "--temperature", "0", "--seed", str(seed),
            "--result-file", out]


def run(binary, servers, args, tmp, rep):
    """One client per server, started together (fresh prompts each repetition: no
    prefix-cache hits); returns (tok/s, ttft p50 ms, duration, per-server metric deltas)."""
    before = [metrics(s.url) for s in servers]
    outs, procs = [], []
    for i, s in enumerate(servers):
        out = os.path.join(tmp, f"r{time.time_ns()}_{i}.json")
        outs.append(out)
        procs.append(subprocess.Popen(bench_cmd(binary, s, args.concurrency // len(servers),
                                                args.num_prompts // len(servers), 1000 * rep + i, args, out),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in procs:
        if p.wait() != 0:
            sys.exit("tandem bench serve failed")
    results = [json.load(open(o)) for o in outs]
    after = [metrics(s.url) for s in servers]
    duration = max(r["duration"] for r in results)
    tokens = sum(r["total_output_tokens"] for r in results)
    ttfts = sorted(t for r in results for t in r["ttfts"] if t is not None and t >= 0)
    deltas = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    return tokens / duration, 1000 * ttfts[len(ttfts) // 2], duration, deltas


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build/fixtures/glm4moe-q4_k_m.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/src/cli/tandem"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    args = ap.parse_args()
    model = os.path.abspath(args.model)

    import gguf
    reader = gguf.GGUFReader(model)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")

    def field(name):
        f = reader.fields.get(f"{arch}.{name}")
        return int(f.parts[-1][0]) if f is not None else 0

    trunk = field("block_count") - field("nextn_predict_layers")
    moe_layers = len({t.name.split(".")[1] for t in reader.tensors
                      if re.match(r"blk\.\d+\.ffn_gate_exps", t.name) and int(t.name.split(".")[1]) < trunk})
    expert_bytes = sum(int(t.n_bytes) for t in reader.tensors
                       if re.match(r"blk\.\d+\.ffn_(gate|up|down)_exps", t.name) and int(t.name.split(".")[1]) < trunk)

    tmp = tempfile.mkdtemp(prefix="ep_bench_")
    one = Server(args.bin, model, ["--threads", "2", "--cpu-affinity", "0,1"], os.path.join(tmp, "one.log"))
    rpc = free_port(2)
    ranks = [Server(args.bin, model, ["--threads", "1", "--cpu-affinity", str(r), "--data-parallel-size", "2",
                                      "--data-parallel-rank", str(r), "--data-parallel-address", "127.0.0.1",
                                      "--data-parallel-rpc-port", str(rpc), "--enable-expert-parallel"],
                    os.path.join(tmp, f"rank{r}.log"), wait=False) for r in range(2)]
    for r in ranks:
        r.wait()
    print(f"# {model}: {moe_layers} MoE layers in the trunk, trunk expert bytes {expert_bytes / 1e6:.1f} MB")
    print(f"# concurrency {args.concurrency}, {args.num_prompts} prompts of {args.input_len} tokens, "
          f"{args.output_len} output tokens (ignore_eos), greedy\n")
    print("| run | config | output tok/s | TTFT p50 ms | all-to-all share (rank 0 / 1) | bytes sent / token / MoE layer | "
          "all-to-all us / token / MoE layer | all-to-all us / step / MoE layer | tokens / step |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for rep in range(args.reps):
        tput_a, ttft_a, _, _ = run(args.bin, [one], args, tmp, 2 * rep)
        print(f"| {rep + 1}A | 1 rank, 2 threads, all experts | {tput_a:.1f} | {ttft_a:.0f} | | | | | |")
        tput_b, ttft_b, dur, deltas = run(args.bin, ranks, args, tmp, 2 * rep + 1)
        shares = " / ".join(f"{d['exchange'] / dur:.0%}" for d in deltas)
        per_tok = [d["bytes"] / max(1, d["prompt"] + d["gen"]) / moe_layers for d in deltas]
        us = [1e6 * d["exchange"] / max(1, d["prompt"] + d["gen"]) / moe_layers for d in deltas]
        steps = [max(1, d["steps"] + d["idle"]) for d in deltas]
        per_step = [1e6 * d["exchange"] / n / moe_layers for d, n in zip(deltas, steps)]
        tok_step = [(d["prompt"] + d["gen"]) / max(1, d["steps"]) for d in deltas]
        print(f"| {rep + 1}B | 2 EP ranks, 1 thread each | {tput_b:.1f} | {ttft_b:.0f} | {shares} | "
              f"{per_tok[0]:.0f} / {per_tok[1]:.0f} | {us[0]:.1f} / {us[1]:.1f} | "
              f"{per_step[0]:.0f} / {per_step[1]:.0f} | {tok_step[0]:.1f} / {tok_step[1]:.1f} |")
        ratios.append(tput_b / tput_a)
    print("\nratio EP / one rank per pair: " + ", ".join(f"{r:.2f}" for r in ratios))
    print("\n| process | model-file pages resident (MiB) | VmRSS (MiB) |")
    print("|---|---|---|")
    for name, s in [("1 rank, all experts", one), ("EP rank 0", ranks[0]), ("EP rank 1", ranks[1])]:
        print(f"| {name} | {mapping_rss_kib(s.p.pid, model) / 1024:.1f} | {vm_rss_kib(s.p.pid) / 1024:.1f} |")
    for s in [one, *ranks]:
        s.stop()


if __name__ == "__main__":
    main()
