#!/usr/bin/env python3
"""Structured outputs: output tok/s with vs without a JSON schema (docs/PERFORMANCE.md).

One `tandem serve` on the default model; chat requests of exactly --output-len tokens
each: "schema" runs under response_format json_schema (an array of person objects with
minItems 50, so the grammar never ends first), "free" runs unconstrained with ignore_eos.
At --concurrency 1 (--requests sequential requests) and 16 (one wave of 16 at once),
interleaved free, schema, free, schema... for --reps rounds; every run is printed, then
the median ratio. One warm-up request of each kind first (token trie build and grammar
compile happen there). Timings only.

Usage: bench/structured_output_bench.py [--model models/default.gguf] [--bin build/src/cli/tandem]
         [--reps 2] [--output-len 48] [--requests 3] [--threads 2]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = {"type": "array", "minItems": 50, "maxItems": 50, "items": {
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                     "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                     "city": {"type": "string", "maxLength": 24}},
    "required": ["name", "age", "city"]}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def request(url, kind, i, output_len):
    body = {"model": "m", "messages": [{"role": "user", "content": f"List people as JSON ({i})."}],
            "max_tokens": output_len, "temperature": 0}
    if kind == "schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "people", "schema": SCHEMA}}
    else:
        body["ignore_eos"] = True
    r = post(url + "/v1/chat/completions", body)
    return r["usage"]["completion_tokens"]


def run(url, kind, concurrency, n, output_len):
    start = time.time()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda i: request(url, kind, i, output_len), range(n)))
    return tokens, tokens / (time.time() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--output-len", type=int, default=48)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="so_bench_", suffix=".log", delete=False)
    proc = subprocess.Popen([args.bin, "serve", args.model, "--served-model-name", "m", "--host", "127.0.0.1",
                             "--port", str(port), "--threads", str(args.threads), "--max-num-seqs", "16",
                             "--max-model-len", "1024", "--kv-cache-memory", "512MiB"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        for kind in ("free", "schema"):
            request(url, kind, -1, args.output_len)  # warm-up
        print("| concurrency | rep | free tok/s | schema tok/s | ratio |")
        print("|---|---|---|---|---|")
        ratios = {}
        for concurrency, n in ((1, args.requests), (16, 16)):
            for rep in range(args.reps):
                free_tokens, free = run(url, "free", concurrency, n, args.output_len)
                schema_tokens, schema = run(url, "schema", concurrency, n, args.output_len)
                assert free_tokens == schema_tokens == n * args.output_len, (free_tokens, schema_tokens)
                ratios.setdefault(concurrency, []).append(schema / free)
                print(f"| {concurrency} | {rep} | {free:.1f} | {schema:.1f} | {schema / free:.3f} |", flush=True)
        for concurrency, r in ratios.items():
            print(f"concurrency {concurrency}: median schema/free = {statistics.median(r):.3f}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
