#!/usr/bin/env python3
"""Tandem beside llama.cpp's own benchmark loops, on one GGUF, same machine, same threads.

Per pair, in alternating order (A B, then B A: these machines drift within minutes):
  llama.cpp   llama-bench -p P -n N (prompt and decode tok/s), llama-batched-bench
              -npp BP -ntg G -npl B (B sequences decoding together: total decode tok/s)
  tandem      tandem bench model --prompt-tokens P --gen-tokens N --batch B
              --batch-prompt-tokens BP --batch-gen-tokens G --json
              (prompt, one-stream decode, B-stream decode through the serving engine;
              the bandwidth roofline on the active weight bytes; peak RSS after load)
Every run is printed, then the ratios (tandem / llama.cpp) per pair.

The llama.cpp tools are built natively by bench/build_llama_cpp.sh (outside the tree).

Usage: bench/compare_llama_bench.py --model M.gguf [--threads 2] [--pairs 2]
       [--prompt-tokens 512] [--gen-tokens 128] [--batch 16] [--batch-prompt-tokens 16]
       [--batch-gen-tokens 32] [--llama-bin DIR] [--tandem-model PATH]

--tandem-model: tandem runs on PATH instead (e.g. a Hugging Face W8A8 checkpoint
directory holding the same weights as M.gguf in another format); llama.cpp on M.gguf.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_line():
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_int8") if f in flags]
    return f"{model} ({platform.machine()}; {' '.join(isa)})"


def run(cmd, timeout):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout, time.time() - t0


def llama_bench(bin_dir, model, threads, p, n):
    out, _ = run([os.path.join(bin_dir, "llama-bench"), "-m", model, "-t", str(threads), "-p", str(p),
                  "-n", str(n), "-r", "1", "-o", "json"], 3600)
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == p and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] == n and r["n_prompt"] == 0)
    return pp, tg


def llama_batched(bin_dir, model, threads, batch, prompt, gen):
    ctx = batch * (prompt + gen) + 64
    out, _ = run([os.path.join(bin_dir, "llama-batched-bench"), "-m", model, "-t", str(threads), "-tb", str(threads),
                  "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", str(prompt), "-ntg", str(gen), "-npl",
                  str(batch)], 3600)
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0] == str(prompt) and cells[2] == str(batch):
            return float(cells[7])
    sys.exit("could not parse llama-batched-bench output:\n" + out)


def tandem_bench(binary, model, threads, p, n, batch, batch_prompt, batch_gen):
    out, _ = run([binary, "bench", "model", "--model", model, "--threads", str(threads), "--prompt-tokens", str(p),
                  "--gen-tokens", str(n), "--batch", str(batch), "--batch-prompt-tokens", str(batch_prompt),
                  "--batch-gen-tokens", str(batch_gen), "--repeat", "1", "--json"], 3600)
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--tandem-model", default="", help="tandem's model (default: --model)")
    ap.add_argument("--llama-bin", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batch-prompt-tokens", type=int, default=16)
    ap.add_argument("--batch-gen-tokens", type=int, default=32)
    args = ap.parse_args()
    bin_dir = args.llama_bin or subprocess.run([os.path.join(ROOT, "bench", "build_llama_cpp.sh")], check=True,
                                               capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tandem_model = args.tandem_model or args.model
    if args.tandem_model:
        print(f"tandem on {tandem_model}")
    print(f"model {os.path.basename(args.model)} ({os.path.getsize(args.model) / 1e9:.2f} GB), "
          f"{args.threads} threads, {cpu_line()}, start {time.strftime('%H:%M:%S')}")
    print("| pair | order | run | prompt tok/s | decode tok/s | batched decode tok/s | extra |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for i in range(args.pairs):
        order = ["llama.cpp", "tandem"] if i % 2 == 0 else ["tandem", "llama.cpp"]
        res = {}
        for who in order:
            if who == "llama.cpp":
                pp, tg = llama_bench(bin_dir, args.model, args.threads, args.prompt_tokens, args.gen_tokens)
                bt = llama_batched(bin_dir, args.model, args.threads, args.batch, args.batch_prompt_tokens,
                                   args.batch_gen_tokens)
                res[who] = (pp, tg, bt)
                extra = f"{time.strftime('%H:%M:%S')}"
            else:
                j = tandem_bench(args.binary, tandem_model, args.threads, args.prompt_tokens, args.gen_tokens,
                                 args.batch, args.batch_prompt_tokens, args.batch_gen_tokens)
                res[who] = (j["prompt_tokens_per_s"], j["decode_tokens_per_s"],
                            j["batched_decode_tokens_per_s"][str(args.batch)])
                extra = (f"{time.strftime('%H:%M:%S')}; decode {100 * j['decode_roofline_fraction']:.0f}% of the "
                         f"roofline ({j['memory_bandwidth_gb_s']:.1f} GB/s, "
                         f"{j['active_weight_bytes_per_token'] / 1e6:.0f} MB active/token); peak RSS after load "
                         f"{j['peak_rss_after_load_bytes'] / 1e6:.0f} MB of a {j['model_file_bytes'] / 1e6:.0f} MB model"
                         + (f"; load {j['load_seconds']:.1f} s" if "load_seconds" in j else ""))
            pp, tg, bt = res[who]
            print(f"| {i + 1} | {order.index(who) + 1} | {who} | {pp:.1f} | {tg:.2f} | {bt:.2f} | {extra} |", flush=True)
        t, l = res["tandem"], res["llama.cpp"]
        ratios.append((t[0] / l[0], t[1] / l[1], t[2] / l[2]))
    print()
    print("| pair | prompt tandem/llama.cpp | decode tandem/llama.cpp | batched tandem/llama.cpp |")
    print("|---|---|---|---|")
    for i, (a, b, c) in enumerate(ratios):
        print(f"| {i + 1} | {a:.2f}x | {b:.2f}x | {c:.2f}x |")


if __name__ == "__main__":
    main()
