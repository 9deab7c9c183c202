#!/usr/bin/env python3
"""Serving benchmarks of one `tandem serve` instance (issue: serving).

1. Output throughput (generated tokens / wall second) at several concurrencies: each
   client thread sends back-to-back streaming completions with different seeds,
   max_tokens fixed, EOS ignored. Every request's prompt starts with its own tag (run,
   client, request), so no request finds another's prompt in the prefix cache;
   --shared-prompt sends the one untagged prompt to every request instead (from the
   second request on, its prompt blocks come from the prefix cache: a prefix-cache
   measurement, and what this benchmark did before the tags).
2. TTFT of a ~1000-token prompt, cold (new text) vs prefix-cached (the same prompt again).

Usage: bench/serve_bench.py --url http://127.0.0.1:8000 [--concurrency 1 4 16]
       bench/serve_bench.py --start [--model models/default.gguf]   (starts a server itself)
Prints a Markdown table; timings only, no assertions (benchmarks live here, not in tests).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stream_completion(url, model, prompt, max_tokens, seed):
    """Returns (ttft_s, n_tokens, total_s) of one streaming completion."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                       "ignore_eos": True, "temperature": 0.8, "seed": seed,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft = None
    n_tokens = 0
    with urllib.request.urlopen(req, timeout=600) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and ttft is None:
                ttft = time.perf_counter() - t0
            if chunk.get("usage"):
                n_tokens = chunk["usage"]["completion_tokens"]
    return ttft, n_tokens, time.perf_counter() - t0


STORY_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def throughput(url, model, concurrency, requests_per_client, max_tokens, shared_prompt):
    totals = [0] * concurrency
    run = f"{time.time():.6f}"  # runs against the same server do not share prompts either

    def client(i):
        for k in range(requests_per_client):
            # The tag comes first: the prefix cache matches whole blocks from the start.
            prompt = STORY_PROMPT if shared_prompt else f"[request {run}-{i}-{k}] {STORY_PROMPT}"
            _, n, _ = stream_completion(url, model, prompt, max_tokens, seed=i * 1000 + k)
            totals[i] += n

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(totals) / (time.perf_counter() - t0)


def long_prompt(tag):
    with open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), encoding="utf-8") as f:
        text = f.read()
    return f"[{tag}] " + text[:4200]  # ~1000 tokens for the default model


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--start", action="store_true", help="start a tandem serve of --model")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shared-prompt", action="store_true",
                    help="throughput: send the same prompt to every request (measures the prefix cache "
                         "from the second request on); default: a distinct prompt per request")
    args = ap.parse_args()
    proc = None
    url = args.url
    if args.start:
        port = free_port()
        proc = subprocess.Popen([args.binary, "serve", args.model, "--host", "127.0.0.1", "--port", str(port),
                                 "--threads", str(args.threads), "--served-model-name", "bench"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
    try:
        models = json.load(urllib.request.urlopen(url + "/v1/models"))
        model = models["data"][0]["id"]
        print("| figure | value |")
        print("|---|---|")
        base = None
        for c in args.concurrency:
            tps = throughput(url, model, c, args.requests_per_client, args.max_tokens, args.shared_prompt)
            base = base or tps
            prompts = "one shared prompt" if args.shared_prompt else "distinct prompts"
            print(f"| output tok/s, concurrency {c}, {prompts} | {tps:.1f} "
                  f"({tps / base:.2f}x concurrency {args.concurrency[0]}) |")
        colds, hits = [], []
        for i in range(3):
            prompt = long_prompt(f"run {time.time()} {i}")
            colds.append(stream_completion(url, model, prompt, 1, 0)[0])
            hits.append(stream_completion(url, model, prompt, 1, 0)[0])
        cold, hit = statistics.median(colds), statistics.median(hits)
        print(f"| TTFT ~1000-token prompt, cold | {cold * 1000:.0f} ms |")
        print(f"| TTFT same prompt, prefix-cached | {hit * 1000:.0f} ms ({100 * hit / cold:.1f}% of cold) |")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
