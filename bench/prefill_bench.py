#!/usr/bin/env python3
"""Prompt throughput at long prompts: tandem builds side by side, and llama.cpp's llama-bench.

For each prompt length, in alternating order per pair (A B, then B A: these machines
drift within minutes):
  tandem      tandem bench model --prompt-tokens P --gen-tokens 2 --batch 1 --repeat 1 --json
              for every --binary given (e.g. the tree before and after a change), and with
              --max-num-batched-tokens C for every --chunk C, with the last --binary (a
              chunked prefill of the same prompt: its per-token cost beside the one-chunk
              figure)
  llama.cpp   llama-bench -p P -n 0 -fa 0,1 -r 1 (the better of flash attention off / on),
              when --llama-bin names a directory with llama-bench
  --kv-cache-dtype D...: also the last --binary with `--kv-cache-dtype D` for each D (one
              chunk, and each --chunk), printing the cache's bytes and tokens per GiB
Every run is printed with the CPU model and the kernels' ISA level, then the best per
configuration and the ratios.

Usage: bench/prefill_bench.py --model M.gguf --binary A [--binary B] [--threads 2]
       [--prompts 512 4096 16384] [--pairs 2] [--chunk 2048] [--llama-bin DIR]
       [--kv-cache-dtype fp8 ...]
"""
import argparse
import json
import os
import platform
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
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"{model} ({platform.machine()}; {' '.join(isa)})"


def run(cmd, timeout=3600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def tandem(binary, model, threads, p, chunk, kv_dtype=None):
    cmd = [binary, "bench", "model", "--model", model, "--threads", str(threads), "--prompt-tokens", str(p),
           "--gen-tokens", "2", "--batch", "1", "--repeat", "1", "--json"]
    if chunk:
        cmd += ["--max-num-batched-tokens", str(chunk)]
    if kv_dtype:
        cmd += ["--kv-cache-dtype", kv_dtype]
    out = json.loads(run(cmd).strip().splitlines()[-1])
    kv = ""
    if "kv_cache_dtype" in out:
        kv = (f"; kv {out['kv_cache_dtype']}: {out['kv_cache_bytes_per_token']} B/token, "
              f"{out['kv_cache_tokens_per_gib']} tokens/GiB")
    return out["prompt_tokens_per_s"], out.get("isa", "?") + kv


def llama(bin_dir, model, threads, p):
    rows = json.loads(run([os.path.join(bin_dir, "llama-bench"), "-m", model, "-t", str(threads), "-p", str(p),
                           "-n", "0", "-fa", "0,1", "-r", "1", "-o", "json"]))
    best = max(rows, key=lambda r: r["avg_ts"])
    return best["avg_ts"], "fa=" + str(int(bool(best.get("flash_attn")))), [r["avg_ts"] for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--binary", action="append", required=True, help="tandem binaries (label=path or path)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, nargs="+", default=[512, 4096, 16384])
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--chunk", type=int, nargs="*", default=[], help="also run chunked prefill with these chunks")
    ap.add_argument("--llama-bin", default="")
    ap.add_argument("--kv-cache-dtype", nargs="*", default=[], help="also the last binary with these KV dtypes")
    a = ap.parse_args()

    configs = []  # (label, kind, arg, chunk, kv dtype)
    for i, b in enumerate(a.binary):
        label, path = b.split("=", 1) if "=" in b else (os.path.basename(os.path.dirname(b)) or b, b)
        configs.append((label, "tandem", path, 0, None))
        if i == len(a.binary) - 1:  # the newest build: older ones may lack --max-num-batched-tokens
            for c in a.chunk:
                configs.append((f"{label} chunk {c}", "tandem", path, c, None))
            for d in a.kv_cache_dtype:
                configs.append((f"{label} kv {d}", "tandem", path, 0, d))
                for c in a.chunk:
                    configs.append((f"{label} kv {d} chunk {c}", "tandem", path, c, d))
    if a.llama_bin:
        configs.append(("llama.cpp", "llama", a.llama_bin, 0, None))
    print(f"cpu: {cpu_line()}; threads {a.threads}; load {os.getloadavg()[0]:.1f}; model {a.model}", flush=True)
    best = {}
    for p in a.prompts:
        for pair in range(a.pairs):
            order = configs if pair % 2 == 0 else list(reversed(configs))
            for label, kind, arg, chunk, kv_dtype in order:
                t0 = time.time()
                if kind == "tandem":
                    tps, isa = tandem(arg, a.model, a.threads, p, chunk, kv_dtype)
                    extra = f"isa {isa}"
                else:
                    tps, fa, both = llama(arg, a.model, a.threads, p)
                    extra = f"best {fa} (fa 0/1: {' / '.join(f'{x:.1f}' for x in both)})"
                best[(label, p)] = max(best.get((label, p), 0.0), tps)
                print(f"pp{p} pair {pair + 1} {label}: {tps:.1f} tok/s ({extra}; {time.time() - t0:.0f} s wall, "
                      f"load {os.getloadavg()[0]:.1f})", flush=True)
    print("\nbest of each (tok/s):")
    labels = [c[0] for c in configs]
    print("| prompt | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for p in a.prompts:
        print(f"| {p} | " + " | ".join(f"{best[(l, p)]:.1f}" for l in labels) + " |")
    base = a.prompts[0]
    for l in labels:
        print(f"{l}: " + ", ".join(f"pp{p}/pp{base} {best[(l, p)] / best[(l, base)]:.2f}" for p in a.prompts[1:]))
        if a.llama_bin and l != "llama.cpp":
            print(f"{l} / llama.cpp: " + ", ".join(f"pp{p} {best[(l, p)] / best[('llama.cpp', p)]:.2f}x"
                                                 for p in a.prompts))


if __name__ == "__main__":
    main()
