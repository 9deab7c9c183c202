#!/usr/bin/env python3
"""KV pool disk tier benchmark (issue 20): a prefix-reuse workload whose working set is 4x
the pool worker's arena, with the disk tier vs without it vs an arena large enough for
everything, interleaved (disk, memory, big, disk, memory, big, ...); then the disk tier's
read rate against a plain sequential read (`dd`) of the same spill directory.

Serving part. One etcd, one pool worker, one `tandem serve` engine with the pool
connector (DS_WORKER_ADDR) and a small KV cache of its own (1.3 prefixes, so what it
reuses comes from the pool). `tandem bench serve --workload
shared-prefix` sends --rounds x --num-prefixes requests, one at a time, each a distinct
prefix of --prefix-len tokens plus its own short question. The arena size is measured:
a calibration request reports the pool bytes of one prefix, and the arena is
num_prefixes x that / 4. Per run: the hit rate the client saw (cached_tokens /
prompt_tokens), the TTFT p50 of all requests, of the first request of each prefix (cold:
nothing anywhere) and of the repeats (hits: from the disk tier, the arena, or nowhere),
and the worker's tier counters.

TTFT part. One worker (192 MiB arena, disk tier) and one engine (160 MiB KV cache): per
rep a new prompt of --ttft-len tokens (cold), then, after /reset_prefix_cache and 2 arenas
of filler objects that push its blocks to disk, the same prefix with another question
(a disk-tier hit), then again after /reset_prefix_cache (now a memory hit). max_tokens 1;
TTFT = the request's wall time.

Read part. A worker with a 128 MiB arena and a spill directory takes --read-mib MiB of
16 MiB objects (so most are spilled), then the older half (only on disk) is read back by
one `pool_tool get` in gets of 2 (promotion: pread + XXH64 check into the arena); GB/s =
bytes read / wall time. The same directory read with `dd bs=4M` (page cache, as the
tier's reads are) and with `dd iflag=direct` (the device), same run.

Usage: bench/pool_disk_bench.py [--model models/default.gguf] [--reps 2]
         [--num-prefixes 6] [--prefix-len 1000] [--rounds 2] [--ttft-len 4000]
         [--threads 2] [--read-mib 512] [--spill-root /tmp] [--configs disk memory big]
         [--lease-ms MS] [--skip-serving] [--skip-ttft] [--skip-read]
Starts every process itself on 127.0.0.1 (free ports) and stops them by pid. Timings only.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ["disk", "memory", "big"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def metrics(url):
    """{name{labels}: value} of a /metrics page."""
    out = {}
    for line in http(url).decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def metric(m, name, **labels):
    total = 0.0
    for key, value in m.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


class Proc:
    def __init__(self, cmd, log, ready_url=None, env=None, timeout=120):
        self.log = open(log, "wb")
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while ready_url and time.time() < deadline:
            if self.p.poll() is not None:
                raise RuntimeError(f"{cmd[:2]} exited: see {log}")
            try:
                http(ready_url, timeout=2)
                return
            except Exception:
                time.sleep(0.2)
        if ready_url:
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


class Cluster:
    """etcd for the whole run; one worker (+ engine) per configuration run."""

    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        port, peer = free_port(), free_port()
        self.etcd_address = f"127.0.0.1:{port}"
        url, purl = f"http://{self.etcd_address}", f"http://127.0.0.1:{peer}"
        self.etcd = Proc(["/usr/bin/etcd", "--name", "b", "--data-dir", os.path.join(tmp, "etcd"),
                          "--listen-client-urls", url, "--advertise-client-urls", url,
                          "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                          "--initial-cluster", f"b={purl}"],
                         os.path.join(tmp, "etcd.log"), url + "/health")

    def worker(self, name, arena_mb, spill_dir=None, extra=()):
        port, mport = free_port(), free_port()
        cmd = [self.args.bin, "pool", "run", "--worker_address", f"127.0.0.1:{port}",
               "--etcd_address", self.etcd_address, "--shared_memory_size_mb", str(arena_mb),
               "--metrics_port", str(mport), "--node_timeout_s", "3", "--node_dead_timeout_s", "6"]
        if spill_dir:
            cmd += ["--spill_directory", spill_dir]
        cmd += list(extra)
        p = Proc(cmd, os.path.join(self.tmp, f"worker-{name}.log"), f"http://127.0.0.1:{mport}/health")
        p.address, p.metrics = f"127.0.0.1:{port}", f"http://127.0.0.1:{mport}/metrics"
        return p

    def engine(self, name, worker, kv_cache_memory=None, max_model_len=None):
        port = free_port()
        config = {"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
                  "kv_connector_extra_config": {"backend": "yuanrong"}}
        cmd = [self.args.bin, "serve", self.args.model, "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", "default", "--kv-cache-memory",
               kv_cache_memory or self.args.kv_cache_memory,
               "--threads", str(self.args.threads), "--enable-prompt-tokens-details",
               "--max-model-len", str(max_model_len or self.args.prefix_len + 1024),
               "--kv-transfer-config", json.dumps(config)]
        env = dict(os.environ, DS_WORKER_ADDR=worker.address)
        p = Proc(cmd, os.path.join(self.tmp, f"engine-{name}.log"), f"http://127.0.0.1:{port}/health",
                 env=env, timeout=300)
        p.url = f"http://127.0.0.1:{port}"
        return p


def bench(args, url, result, seed):
    cmd = [args.bin, "bench", "serve", "--base-url", url, "--model", "default",
           "--workload", "shared-prefix", "--num-prefixes", str(args.num_prefixes),
           "--num-prompts", str(args.num_prefixes * args.rounds), "--prefix-len", str(args.prefix_len),
           "--input-len", "32", "--output-len", "4", "--ignore-eos", "--max-concurrency", "1",
           "--seed", str(seed), "--tokenizer-url", url, "--disable-progress", "--result-file", result]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(result) as f:
        return json.load(f)


def p50(xs):
    return statistics.median(xs) * 1000 if xs else float("nan")


def serving(args, cluster, tmp):
    # Calibration: the pool bytes of one prefix.
    w = cluster.worker("calibrate", 2048)
    e = cluster.engine("calibrate", w)
    try:
        bench_args = argparse.Namespace(**{**vars(args), "num_prefixes": 1, "rounds": 1})
        bench(bench_args, e.url, os.path.join(tmp, "calibrate.json"), 99)
        time.sleep(2)  # the write-behind saves land
        prefix_bytes = metric(metrics(w.metrics), "tandem_pool_tier_bytes", tier="memory")
    finally:
        e.stop()
        w.stop()
    arena_mb = max(4, int(args.num_prefixes * prefix_bytes / 4 / (1 << 20)))
    # The engine's own cache: one request and a bit (1.3 prefixes), so it cannot keep the set.
    kv_cache = f"{int(prefix_bytes * 1.3 / (1 << 20)) + 1}MiB"
    big_mb = int(args.num_prefixes * prefix_bytes * 1.5 / (1 << 20)) + 64
    print(f"one prefix: {prefix_bytes / (1 << 20):.1f} MiB in the pool; working set "
          f"{args.num_prefixes * prefix_bytes / (1 << 20):.0f} MiB; arena {arena_mb} MiB (big: {big_mb} MiB); "
          f"engine KV cache {kv_cache}")
    rows = []
    for rep in range(args.reps):
        for config in args.configs:
            spill = tempfile.mkdtemp(prefix="spill-", dir=args.spill_root) if config == "disk" else None
            lease = () if args.lease_ms is None else ("--default_kv_lease_ttl", str(args.lease_ms))
            w = cluster.worker(f"{config}-{rep}", big_mb if config == "big" else arena_mb, spill, lease)
            e = cluster.engine(f"{config}-{rep}", w, kv_cache_memory=kv_cache)
            try:
                r = bench(args, e.url, os.path.join(tmp, f"{config}-{rep}.json"), rep)
                m = metrics(w.metrics)
            finally:
                e.stop()
                w.stop()
                if spill:
                    shutil.rmtree(spill, ignore_errors=True)
            # The first request of each prefix (in completion order, one at a time) is cold
            # in every configuration; the others repeat a prefix.
            cached, prompt, ttft = r["cached_tokens"], r["input_lens"], r["ttfts"]
            seen, first = set(), []
            for g in r["groups"]:
                first.append(g not in seen)
                seen.add(g)
            hit_rate = sum(cached) / sum(prompt)
            cold = [(c, t) for c, t, f in zip(cached, ttft, first) if f]
            repeats = [(c, t) for c, t, f in zip(cached, ttft, first) if not f]
            rows.append({
                "rep": rep + 1, "config": config, "hit_rate": hit_rate,
                "ttft_p50_ms": p50(ttft), "cold_p50_ms": p50([t for _, t in cold]),
                "repeat_p50_ms": p50([t for _, t in repeats]),
                "hit_p50_ms": p50([t for c, t in repeats if c >= args.prefix_len * 0.9]),
                "full_hits": sum(1 for c, _ in repeats if c >= args.prefix_len * 0.9),
                "repeats": len(repeats),
                "disk_hits": metric(m, "tandem_pool_tier_hits_total", tier="disk"),
                "memory_hits": metric(m, "tandem_pool_tier_hits_total", tier="memory"),
                "spills": metric(m, "tandem_pool_spills_total"),
                "promotions": metric(m, "tandem_pool_promotions_total"),
                "disk_read_mib": metric(m, "tandem_pool_disk_read_bytes_total") / (1 << 20),
                "cold_had_hits": sum(1 for c, _ in cold if c >= 16),
            })
            print(json.dumps(rows[-1]), flush=True)
    print("\n| run | config | hit rate | TTFT p50 all (ms) | cold p50 (ms) | repeat p50 (ms) | "
          "full hits / repeats | hit p50 (ms) | pool tier hits (memory / disk blocks) | spills | disk read MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rep']} | {r['config']} | {r['hit_rate']:.3f} | {r['ttft_p50_ms']:.0f} | "
              f"{r['cold_p50_ms']:.0f} | {r['repeat_p50_ms']:.0f} | {r['full_hits']} / {r['repeats']} | "
              f"{r['hit_p50_ms']:.0f} | {r['memory_hits']:.0f} / {r['disk_hits']:.0f} | {r['spills']:.0f} | "
              f"{r['disk_read_mib']:.0f} |")
    for config in args.configs:
        mine = [r for r in rows if r["config"] == config]
        print(f"median {config}: hit rate {statistics.median(r['hit_rate'] for r in mine):.3f}, "
              f"TTFT p50 {statistics.median(r['ttft_p50_ms'] for r in mine):.0f} ms, "
              f"hit p50 / cold p50 "
              f"{statistics.median(r['hit_p50_ms'] / r['cold_p50_ms'] for r in mine):.3f}")


def words(tag, n):
    vocab = ["time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child",
             "world", "school", "state", "family", "student", "group", "country", "problem"]
    return f"{tag}: " + " ".join(f"{vocab[(i * 7919) % len(vocab)]} {i % 97}" for i in range(n))


def ttft_4k(args, cluster, tmp):
    """TTFT of a prompt of --ttft-len tokens: cold, a disk-tier hit, a memory hit."""
    pool_tool = os.path.join(os.path.dirname(os.path.dirname(args.bin)), "pool", "pool_tool")
    spill = tempfile.mkdtemp(prefix="spill-ttft-", dir=args.spill_root)
    arena_mb = 192  # holds one 4k-token prefix (~75 MiB) and a promotion of it
    w = cluster.worker("ttft", arena_mb, spill)
    e = cluster.engine("ttft", w, kv_cache_memory="160MiB", max_model_len=args.ttft_len + 1024)
    rows = []
    try:
        per_1000 = json.loads(http(e.url + "/tokenize", {"prompt": words("x", 1000)}))["count"]
        n_words = int(1000 * args.ttft_len / per_1000)  # words for ~ttft_len tokens

        def ask(prompt):
            t = time.time()
            r = json.loads(http(e.url + "/v1/completions", {"model": "default", "prompt": prompt,
                                                            "max_tokens": 1, "temperature": 0}, timeout=600))
            u = r["usage"]
            return time.time() - t, u["prompt_tokens"], (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        for rep in range(args.reps):
            text = words(f"doc {rep}", n_words)
            cold = ask(text + " Question one?")
            time.sleep(2)  # the write-behind saves land
            http(e.url + "/reset_prefix_cache", {})
            for start in range(0, 2 * arena_mb // 4, 4):  # 2 arenas of filler: the prefix spills
                subprocess.run([pool_tool, "put", "--worker", w.address, "--prefix", f"f{rep}",
                                "--count", "4", "--start", str(start), "--size", str(1 << 20)],
                               check=True, capture_output=True)
            while metric(metrics(w.metrics), "tandem_pool_spill_queue_bytes") > 0:
                time.sleep(0.1)
            disk = ask(text + " Question two?")
            http(e.url + "/reset_prefix_cache", {})
            memory = ask(text + " Question three?")  # promoted: now in the arena
            row = {"rep": rep + 1, "prompt_tokens": cold[1], "cold_ms": cold[0] * 1000,
                   "disk_hit_ms": disk[0] * 1000, "disk_cached": disk[2],
                   "memory_hit_ms": memory[0] * 1000, "memory_cached": memory[2]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        e.stop()
        w.stop()
        shutil.rmtree(spill, ignore_errors=True)
    print("\n| run | prompt tokens | cold TTFT (ms) | disk-tier hit TTFT (ms) | cached | disk / cold | "
          "memory hit TTFT (ms) | memory / cold |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['rep']} | {r['prompt_tokens']} | {r['cold_ms']:.0f} | {r['disk_hit_ms']:.0f} | "
              f"{r['disk_cached']} | {r['disk_hit_ms'] / r['cold_ms']:.3f} | {r['memory_hit_ms']:.0f} | "
              f"{r['memory_hit_ms'] / r['cold_ms']:.3f} |")


def read_rate(args, cluster, tmp):
    pool_tool = os.path.join(os.path.dirname(os.path.dirname(args.bin)), "pool", "pool_tool")
    spill = tempfile.mkdtemp(prefix="spill-read-", dir=args.spill_root)
    w = cluster.worker("read", 128, spill, extra=("--default_kv_lease_ttl", "0"))
    size, n = 16 << 20, args.read_mib // 16
    try:
        def tool(*a):
            r = subprocess.run([pool_tool, *a, "--worker", w.address, "--size", str(size)],
                               check=True, capture_output=True, text=True)
            return json.loads(r.stdout)
        for start in range(0, n, 2):
            tool("put", "--prefix", "r", "--count", "2", "--start", str(start))
        while metric(metrics(w.metrics), "tandem_pool_spill_queue_bytes") > 0:
            time.sleep(0.1)
        before = metric(metrics(w.metrics), "tandem_pool_disk_read_bytes_total")
        # The older half: only on disk (the arena holds the last ~7); gets of 2 (32 MiB).
        got = tool("get", "--prefix", "r", "--count", str(n // 2), "--batch", "2", "--verify", "0")
        elapsed, corrupt = got["seconds"], got["corrupt"]
        read = metric(metrics(w.metrics), "tandem_pool_disk_read_bytes_total") - before
        files = sorted(glob.glob(os.path.join(spill, "*.kv")))
        total = sum(os.path.getsize(f) for f in files)

        def dd(extra):
            t = time.time()
            for f in files:
                subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=4M", *extra], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return total / (time.time() - t) / 1e9
        dd_cached = dd([])
        dd_direct = dd(["iflag=direct"])
        tier = read / elapsed / 1e9
        print(f"\ndisk tier read: {read / (1 << 20):.0f} MiB in {elapsed:.2f} s = {tier:.2f} GB/s "
              f"(one pool_tool process, gets of 2 x 16 MiB: promotion = pread + XXH64 check; "
              f"corrupt {corrupt}); "
              f"dd bs=4M of the same {len(files)} files ({total / (1 << 20):.0f} MiB): {dd_cached:.2f} GB/s "
              f"(page cache), {dd_direct:.2f} GB/s (iflag=direct); tier / dd = {tier / dd_cached:.2f}")
    finally:
        w.stop()
        shutil.rmtree(spill, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "src", "cli", "tandem"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--num-prefixes", type=int, default=6)
    ap.add_argument("--prefix-len", type=int, default=1000)
    ap.add_argument("--ttft-len", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kv-cache-memory", default="100MiB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--read-mib", type=int, default=512)
    ap.add_argument("--spill-root", default="/tmp")
    ap.add_argument("--skip-serving", action="store_true")
    ap.add_argument("--skip-ttft", action="store_true")
    ap.add_argument("--skip-read", action="store_true")
    ap.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS)
    ap.add_argument("--lease-ms", type=int, default=None,
                    help="--default_kv_lease_ttl of the serving workers (default: theirs)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pool_disk_bench_")
    cluster = Cluster(args, tmp)
    try:
        if not args.skip_serving:
            serving(args, cluster, tmp)
        if not args.skip_ttft:
            ttft_4k(args, cluster, tmp)
        if not args.skip_read:
            read_rate(args, cluster, tmp)
    finally:
        cluster.etcd.stop()
        print(f"logs: {tmp}")


if __name__ == "__main__":
    main()
