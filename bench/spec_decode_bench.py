#!/usr/bin/env python3
"""Speculative decoding (ngram prompt lookup) vs none on this machine (issue: speculative
decoding). Starts two `tandem serve` on the same model (identical flags, one with
--speculative-config), both on all cores but only one benchmarked at a time, and runs
`tandem bench serve` against them interleaved (A B A B) for each workload and
concurrency: `quote` (answers repeat their prompt) at concurrency 1 and 8, `random` at
1 and 16. Greedy (temperature 0); each rep draws new prompts (seed per rep and case, the
same for both servers), so no rep finds its prompts in a prefix cache. `--endpoint /v1/chat/completions` sends the prompts through
the chat template (an instruction-tuned model follows the quote workload's instruction
there; on /v1/completions the default model mostly does not copy a long passage). Prints a Markdown table: output tok/s of each run, the
ratio ngram / none per pair, and the mean acceptance length of the ngram runs (1 +
accepted / drafts, from the server's vllm:spec_decode_* counters), and each run's duration
and mean time to first token.

Usage: bench/spec_decode_bench.py [--model models/default.gguf] [--bin build/src/cli/tandem]
           [--reps 2] [--num-prompts 16] [--output-len 128] [--input-len 200] [--k 4]
           [--endpoint /v1/completions|/v1/chat/completions] [--cases quote:1,quote:8,random:1,random:16]
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(url, name):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Server:
    def __init__(self, binary, model, extra, log):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.p = subprocess.Popen([binary, "serve", model, "--port", str(self.port), "--served-model-name", "m",
                                   "--max-model-len", "4096", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.p.poll() is not None:
                sys.exit(f"tandem serve exited; see {log}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2)
                return
            except Exception:
                time.sleep(0.3)
        sys.exit("tandem serve did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def run_bench(binary, server, workload, concurrency, args, tmp, seed):
    out = os.path.join(tmp, f"r{time.time_ns()}.json")
    drafts0 = metric(server.url, "vllm:spec_decode_num_drafts_total")
    acc0 = metric(server.url, "vllm:spec_decode_num_accepted_tokens_total")
    cmd = [binary, "bench", "serve", "--base-url", server.url, "--model", "m", "--workload", workload,
           "--num-prompts", str(max(args.num_prompts, concurrency * 2)), "--max-concurrency", str(concurrency),
           "--input-len", str(args.input_len), "--output-len", str(args.output_len), "--temperature", "0",
           "--seed", str(seed), "--endpoint", args.endpoint, "--result-file", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        result = json.load(f)
    drafts = metric(server.url, "vllm:spec_decode_num_drafts_total") - drafts0
    acc = metric(server.url, "vllm:spec_decode_num_accepted_tokens_total") - acc0
    return result, (1 + acc / drafts) if drafts else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--input-len", type=int, default=200)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--cases", default="quote:1,quote:8,random:1,random:16")
    ap.add_argument("--endpoint", default="/v1/completions", choices=["/v1/completions", "/v1/chat/completions"])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="spec-bench-")
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": args.k, "prompt_lookup_min": 2,
                       "prompt_lookup_max": 5})
    none = Server(args.bin, args.model, [], os.path.join(tmp, "none.log"))
    ngram = Server(args.bin, args.model, ["--speculative-config", spec], os.path.join(tmp, "ngram.log"))
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = re.search(r"Model name:\s*(.*)", cpu)
    print(f"CPU: {model_name.group(1) if model_name else '?'}; spec: {spec}; output_len {args.output_len}, "
          f"input_len {args.input_len}, endpoint {args.endpoint}")
    # Beside the throughputs: each run's duration and mean time to first token. Both servers
    # prefill the same prompts at the same speed, so that time (about the TTFT times the
    # requests in turn at concurrency 1) is a part of both durations that drafts cannot shorten.
    print("| workload | concurrency | rep | none tok/s | ngram tok/s | ngram / none | mean acceptance length "
          "| duration s (none / ngram) | mean TTFT ms (none / ngram) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for case in args.cases.split(","):
            workload, conc = case.split(":")
            for rep in range(args.reps):
                # New prompts each rep (the same for both servers of the pair): with one seed
                # for every rep, later reps would find their prompts in the prefix cache.
                seed = 1000 * (rep + 1) + int(conc)
                ra, _ = run_bench(args.bin, none, workload, int(conc), args, tmp, seed)
                rb, mal = run_bench(args.bin, ngram, workload, int(conc), args, tmp, seed)
                a, b = ra["output_throughput"], rb["output_throughput"]
                mal_text = f"{mal:.2f}" if mal else "no drafts"
                print(f"| {workload} | {conc} | {rep + 1} | {a:.1f} | {b:.1f} | {b / a:.2f}x | {mal_text} "
                      f"| {ra['duration']:.2f} / {rb['duration']:.2f} "
                      f"| {ra['mean_ttft_ms']:.0f} / {rb['mean_ttft_ms']:.0f} |", flush=True)
    finally:
        none.stop()
        ngram.stop()


if __name__ == "__main__":
    main()
