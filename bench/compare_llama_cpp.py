#!/usr/bin/env python3
"""Prompt and generation throughput of `tandem generate` beside llama.cpp, same run.

Both run the same GGUF on the same machine with the same thread count, one after the
other: a 512-token prompt (pp512) and 128 generated tokens (tg128), greedy, EOS ignored.
llama.cpp comes from llama-cpp-python (PyPI); it is a measuring stick, not a dependency.

Usage: bench/compare_llama_cpp.py [--model models/default.gguf] [--threads 1 2] [--repeat 3]
Prints a Markdown table (the best of --repeat runs for each figure).
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prompt_text(n_tokens, tokenize):
    with open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), encoding="utf-8") as f:
        text = f.read()
    # Cut the text so that it encodes to n_tokens tokens (BOS included).
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenize(text[:mid])) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def bench_tandem(binary, model, prompt, threads, n_gen):
    out = subprocess.run([binary, "generate", "--model", model, "-p", prompt, "-n", str(n_gen),
                          "--ignore-eos", "--threads", str(threads), "-v"],
                         capture_output=True, text=True, check=True)
    m = re.search(r"prompt: (\d+) tokens in ([\d.]+) s .*generated: (\d+) tokens in ([\d.]+) s", out.stderr)
    if not m:
        sys.exit("could not parse tandem timings:\n" + out.stderr)
    n_p, t_p, n_g, t_g = int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))
    return n_p / t_p, n_g / t_g


def bench_llama_cpp(llm, prompt_tokens, n_gen):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt_tokens)
    t_prompt = time.perf_counter() - t0
    # Greedy generation, one token at a time, EOS ignored (as llama-bench's tg does).
    t0 = time.perf_counter()
    for _ in range(n_gen):
        token = llm.sample(temp=0.0)
        llm.eval([token])
    t_gen = time.perf_counter() - t0
    return len(prompt_tokens) / t_prompt, n_gen / t_gen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from llama_cpp import Llama

    rows = []
    for threads in args.threads:
        llm = Llama(model_path=args.model, n_ctx=args.prompt_tokens + args.gen_tokens + 8,
                    n_batch=args.prompt_tokens, n_threads=threads, n_threads_batch=threads,
                    verbose=False)
        tok = lambda s: llm.tokenize(s.encode("utf-8"), add_bos=True, special=True)
        prompt = prompt_text(args.prompt_tokens, tok)
        prompt_tokens = tok(prompt)
        best_t = (0.0, 0.0)
        best_l = (0.0, 0.0)
        for _ in range(args.repeat):
            t = bench_tandem(args.binary, args.model, prompt, threads, args.gen_tokens)
            best_t = (max(best_t[0], t[0]), max(best_t[1], t[1]))
            l = bench_llama_cpp(llm, prompt_tokens, args.gen_tokens)
            best_l = (max(best_l[0], l[0]), max(best_l[1], l[1]))
        rows.append((threads, len(prompt_tokens), best_t, best_l))
        del llm
    print(f"| threads | figure | tandem tok/s | llama.cpp tok/s | tandem / llama.cpp |")
    print(f"|---|---|---|---|---|")
    for threads, n_prompt, t, l in rows:
        print(f"| {threads} | prompt (pp{n_prompt}) | {t[0]:.1f} | {l[0]:.1f} | {t[0] / l[0]:.2f}x |")
        print(f"| {threads} | generation (tg{args.gen_tokens}) | {t[1]:.1f} | {l[1]:.1f} | {t[1] / l[1]:.2f}x |")


if __name__ == "__main__":
    main()
