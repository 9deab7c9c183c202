"""The KV pool's disk tier with real workers and the real etcd: objects evicted from a small
arena spill to `--spill_directory` and come back on a get; a worker killed with -9 and
restarted on the same directory serves its disk objects again; a corrupted spill file is
never served (the engine recomputes, with the same output); a full disk (a tiny size limit,
or a small tmpfs) leaves the worker serving from memory, logging once per interval; bad
flags exit 2 naming the flag. Every process started here is stopped by pid."""
import os
import pathlib
import re
import subprocess
import time

import pytest
import requests

from tandem_procs import free_port
from test_pool import BLOCK, Worker, etcd, tool, wait_for  # noqa: F401 (etcd is a fixture)
from test_pool import pool_tool  # noqa: F401 (a fixture)


@pytest.fixture
def workers(tandem_bin, tmp_path, etcd):  # noqa: F811
    started = []

    def make(**kw):
        w = Worker(tandem_bin, tmp_path, etcd, name=f"w{len(started)}", **kw)
        started.append(w)
        return w
    yield make
    for w in started:
        if w.alive():
            w.kill9()


def tier_metric(w, name, tier):
    """The value of `name{tier="..."}` on the worker's /metrics (0 when absent)."""
    text = requests.get(f"http://127.0.0.1:{w.metrics_port}/metrics", timeout=5).text
    m = re.search(r"^" + re.escape(name) + r'\{tier="' + tier + r'"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def spill_dir(tmp_path, name="spill"):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return d


def files(d):
    return sorted(p for p in pathlib.Path(d).glob("*.kv"))


def disk_args(d, limit=0, lease_ms=0):
    return ("--spill_directory", str(d), "--spill_size_limit", str(limit),
            "--default_kv_lease_ttl", str(lease_ms))


def settled(w, spills=0):
    """Waits until the disk writer (asynchronous) wrote everything evicted so far and at
    least `spills` files in all."""
    return wait_for(lambda: w.metric("tandem_pool_spill_queue_bytes") == 0
                    and (w.metric("tandem_pool_spills_total") or 0) >= spills, 10)


def test_spill_then_promote_with_a_small_arena(workers, pool_tool, tmp_path):  # noqa: F811
    d = spill_dir(tmp_path)
    w = workers(shm_mb=4, extra=disk_args(d))  # 16 blocks of 256 KiB; evicts from 90 % to 80 %
    for batch in range(8):  # 64 blocks: four arenas' worth
        assert tool(pool_tool, w, "put", "b", 8, start=batch * 8)["stored"] == 8
    evicted = w.metric("tandem_pool_evictions_total")
    assert evicted >= 48
    assert settled(w, evicted)
    assert len(files(d)) == evicted
    assert w.metric("tandem_pool_tier_objects") >= 64  # memory + disk (a promoted file stays)

    got = tool(pool_tool, w, "get", "b", 8, start=0)  # the oldest: on disk only
    got.pop("seconds")
    assert got == {"hits": 8, "misses": 0, "remote": 0, "disk": 8, "corrupt": 0}, got
    newest = tool(pool_tool, w, "get", "b", 4, start=60)
    assert newest["hits"] == 4 and newest["disk"] == 0  # still in the arena
    assert tool(pool_tool, w, "exist", "b", 64)["exist"] == 64
    assert w.metric("tandem_pool_promotions_total") == 8
    assert w.metric("tandem_pool_hits_total") >= 12
    assert w.metric("tandem_pool_disk_read_bytes_total") == 8 * BLOCK
    # (The promotions evicted more: each of those was written too.)
    assert w.metric("tandem_pool_disk_write_bytes_total") == w.metric("tandem_pool_spills_total") * BLOCK
    # Every object, wherever it is, reads back intact.
    for start in range(0, 64, 8):
        r = tool(pool_tool, w, "get", "b", 8, start=start)
        assert r["hits"] == 8 and r["corrupt"] == 0, (start, r)
    assert w.alive()
    # `tandem watch` on the worker's /metrics: a hit rate per tier.
    hits = {t: tier_metric(w, "tandem_pool_tier_hits_total", t) for t in ("memory", "disk")}
    misses = {t: tier_metric(w, "tandem_pool_tier_misses_total", t) for t in ("memory", "disk")}
    watch = subprocess.run([w.bin, "watch", "-u", f"http://127.0.0.1:{w.metrics_port}/metrics", "-n", "1"],
                           capture_output=True, text=True, timeout=30)
    assert watch.returncode == 0, watch.stderr
    lines = watch.stdout.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("pool "))
    row = lines[header + 1].split()
    mem = 100 * hits["memory"] / (hits["memory"] + misses["memory"])
    disk = 100 * hits["disk"] / (hits["disk"] + misses["disk"])
    assert row[0] == f"127.0.0.1:{w.metrics_port}", watch.stdout
    assert row[2] == f"{mem:.1f}%" and row[4] == f"{disk:.1f}%", watch.stdout


def test_kill9_and_restart_serves_disk_objects_again(workers, pool_tool, tmp_path):  # noqa: F811
    d = spill_dir(tmp_path)
    w = workers(shm_mb=4, extra=disk_args(d))
    for batch in range(6):
        assert tool(pool_tool, w, "put", "r", 8, start=batch * 8)["stored"] == 8
    evicted = w.metric("tandem_pool_evictions_total")
    assert settled(w, evicted)
    on_disk = len(files(d))
    assert on_disk == evicted >= 32
    w.kill9()
    w.start()  # same flags, same directory
    assert wait_for(lambda: w.metric("tandem_pool_tier_objects") is not None, 10)
    assert f"{on_disk} objects (" in w.log()  # "... re-indexed" at start
    # What was in the arena died with the process; everything spilled is served again (in
    # gets of 8: one get pins what it promotes, and 36 blocks do not fit the arena at once).
    got = [tool(pool_tool, w, "get", "r", 8, start=s) for s in range(0, 48, 8)]
    assert sum(g["hits"] for g in got) == on_disk, got
    assert sum(g["disk"] for g in got) == on_disk, got
    assert sum(g["corrupt"] for g in got) == 0, got


def test_corrupt_or_truncated_spill_files_are_never_served(workers, pool_tool, tmp_path):  # noqa: F811
    d = spill_dir(tmp_path)
    w = workers(shm_mb=4, extra=disk_args(d))
    for batch in range(4):
        assert tool(pool_tool, w, "put", "c", 8, start=batch * 8)["stored"] == 8
    assert settled(w, w.metric("tandem_pool_evictions_total"))
    w.stop()  # graceful: the arena's objects are lost, the files stay
    spilled = files(d)
    assert len(spilled) >= 16
    flipped, truncated = spilled[0], spilled[1]
    with open(flipped, "r+b") as f:  # one bit of the value
        f.seek(BLOCK // 2)
        byte = f.read(1)
        f.seek(BLOCK // 2)
        f.write(bytes([byte[0] ^ 0x10]))
    os.truncate(truncated, BLOCK // 3)
    w.start()
    assert wait_for(lambda: w.metric("tandem_pool_disk_corrupt_total") is not None, 10)
    assert w.metric("tandem_pool_disk_corrupt_total") == 1  # the truncated one, at the scan
    got = [tool(pool_tool, w, "get", "c", 8, start=s) for s in range(0, 32, 8)]
    assert sum(g["corrupt"] for g in got) == 0, got  # no bad byte reached a reader
    assert sum(g["hits"] for g in got) == len(spilled) - 2, got
    assert w.metric("tandem_pool_disk_corrupt_total") == 2  # the flipped one, on read
    assert not flipped.exists() and not truncated.exists()


def test_full_disk_keeps_serving_from_memory(workers, pool_tool, tmp_path):  # noqa: F811
    d = spill_dir(tmp_path)
    # A limit below one block (256 KiB): no object fits, every spill is dropped.
    w = workers(shm_mb=4, extra=disk_args(d, limit=128 << 10))
    for batch in range(8):
        assert tool(pool_tool, w, "put", "f", 8, start=batch * 8)["stored"] == 8
    assert w.metric("tandem_pool_spill_drops_total") >= 48
    assert w.metric("tandem_pool_spills_total") == 0
    assert tool(pool_tool, w, "get", "f", 8, start=56)["hits"] == 8  # the arena serves
    assert tool(pool_tool, w, "get", "f", 8, start=0)["hits"] == 0   # dropped: a miss
    assert tool(pool_tool, w, "exist", "f", 8, start=0)["exist"] == 0  # and not announced
    warnings = [l for l in w.log().splitlines() if "not spilled" in l]
    assert 1 <= len(warnings) <= 2, warnings  # once per 10 s interval, not once per object
    assert w.alive()

    # A limit of a few blocks: the disk tier's own LRU keeps it under the limit.
    d2 = spill_dir(tmp_path, "spill2")
    w2 = workers(shm_mb=4, extra=disk_args(d2, limit=4 * (BLOCK + 4096)))
    for batch in range(8):
        assert tool(pool_tool, w2, "put", "g", 8, start=batch * 8)["stored"] == 8
    assert settled(w2, w2.metric("tandem_pool_evictions_total"))
    assert len(files(d2)) <= 4
    assert sum(p.stat().st_size for p in files(d2)) <= 4 * (BLOCK + 4096)
    assert w2.metric("tandem_pool_disk_evictions_total") >= 40
    assert tool(pool_tool, w2, "get", "g", 8, start=56)["hits"] == 8
    assert w2.alive()


def test_no_space_left_on_a_tmpfs(workers, pool_tool, tmp_path):  # noqa: F811
    d = spill_dir(tmp_path, "tmpfs")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
                             capture_output=True, timeout=10).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        # The size limit (the default: 95 % of the free space) would allow 3 blocks; fill
        # the tmpfs behind the worker's back so that writes fail with ENOSPC.
        w = workers(shm_mb=4, extra=("--spill_directory", str(d), "--default_kv_lease_ttl", "0"))
        with open(d / "filler", "wb") as f:
            try:
                f.write(b"x" * (1 << 20))
            except OSError:
                pass
        for batch in range(8):
            assert tool(pool_tool, w, "put", "t", 8, start=batch * 8)["stored"] == 8
        assert wait_for(lambda: w.metric("tandem_pool_spill_drops_total") >= 40, 10)
        assert tool(pool_tool, w, "get", "t", 8, start=56)["hits"] == 8
        warnings = [l for l in w.log().splitlines() if "not spilled" in l]
        assert 1 <= len(warnings) <= 2 and "No space left" in warnings[0], warnings
        assert not list(d.glob("*.tmp"))  # failed writes leave nothing behind
        assert w.alive()
        w.stop()
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, timeout=10)


def test_bad_disk_flags_exit_2_naming_the_flag(tandem_bin, tmp_path):
    env = dict(os.environ, TANDEM_POOL_RUN_DIR=str(tmp_path))
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    base = ["--worker_address", f"127.0.0.1:{free_port()}", "--etcd_address", "127.0.0.1:1"]
    cases = [
        (["--spill_directory", str(tmp_path / "absent")], "--spill_directory"),
        (["--spill_directory", str(not_a_dir)], "--spill_directory"),
        (["--spill_directory", str(tmp_path), "--spill_size_limit", "1000"], "--spill_size_limit"),
        (["--spill_size_limit", "1000000"], "--spill_size_limit"),
        (["--spill_directory", str(tmp_path), "--spill_size_limit", "-5"], "spill_size_limit"),
        (["--eviction_high_watermark_ratio", "1.5"], "--eviction_high_watermark_ratio"),
        (["--eviction_ratio", "0.95"], "--eviction_ratio"),
        (["--default_kv_lease_ttl", "-1"], "--default_kv_lease_ttl"),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        cases.append((["--spill_directory", str(ro)], "--spill_directory"))
    for args, word in cases:
        r = subprocess.run([tandem_bin, "pool", "start", "-w", *base, *args], env=env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert word in r.stderr, (args, r.stderr)


def spill_file_keys(d):
    """{path: key} of the spill files (the key follows the 32-byte header)."""
    out = {}
    for p in files(d):
        with open(p, "rb") as f:
            head = f.read(32)
            key_len = int.from_bytes(head[8:12], "little")
            out[p] = f.read(key_len).decode(errors="replace")
    return out


def test_engine_loads_from_disk_and_recomputes_past_a_corrupt_file(
        workers, pool_tool, tandem_bin, fixture_dir, tmp_path):  # noqa: F811
    from test_pool_connector import complete, engine, long_prompt, total
    d = spill_dir(tmp_path)
    w = workers(shm_mb=4, extra=disk_args(d))
    prompt = long_prompt("disk", 60)

    def fresh_engine(name):  # an empty prefix cache: what it reuses comes from the pool
        return engine(tandem_bin, fixture_dir, tmp_path, w, name)

    def evict(prefix):  # 20 blocks of 256 KiB through the 4 MiB arena (in puts of 5)
        for start in range(0, 20, 5):
            assert tool(pool_tool, w, "put", prefix, 5, start=start)["stored"] == 5
        assert settled(w)

    a = fresh_engine("a")
    try:
        want = complete(a, prompt)
        full_blocks = (want["usage"]["prompt_tokens"] - 1) // 16
        assert wait_for(lambda: total(a, "tandem_pool_connector_blocks_saved_total",
                                      outcome="stored") >= full_blocks, 10)
    finally:
        a.stop()
    evict("filler")
    keys = spill_file_keys(d)
    ours = [p for p, k in keys.items() if not k.startswith("filler@")]
    assert len(ours) == full_blocks, keys

    b = fresh_engine("b")
    try:
        got = complete(b, prompt)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["usage"]["prompt_tokens_details"]["cached_tokens"] == full_blocks * 16
        assert total(b, "tandem_pool_connector_blocks_loaded_total", source="disk") == full_blocks
        assert total(b, "tandem_pool_connector_blocks_loaded_total", source="local") == 0
    finally:
        b.stop()

    evict("filler2")  # out of the arena again (the files stay)
    for p in ours:
        with open(p, "r+b") as f:
            f.seek(-100, os.SEEK_END)
            f.write(b"\0" * 50)
    c = fresh_engine("c")
    try:
        got = complete(c, prompt)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]  # recomputed
        assert got["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert total(c, "tandem_pool_connector_blocks_loaded_total", source="disk") == 0
        assert w.metric("tandem_pool_disk_corrupt_total") >= 1
        assert w.alive()
    finally:
        c.stop()


def test_engine_soft_pins_what_it_loaded(workers, pool_tool, tandem_bin, fixture_dir, tmp_path):  # noqa: F811
    """soft_pin_ttl_s: blocks a request loaded from the pool are soft-pinned there, and
    outlive two arenas of colder objects (memory only: nothing could come back from disk)."""
    import json
    from tandem_procs import Server
    from test_pool_connector import complete, long_prompt, total
    w = workers(shm_mb=4)

    def start(name, soft_pin):
        extra = {"backend": "yuanrong"}
        if soft_pin:
            extra["soft_pin_ttl_s"] = 600
        config = {"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
                  "kv_connector_extra_config": extra}
        return Server(tandem_bin, fixture_dir / "llama.gguf",
                      ["--served-model-name", "fixture", "--enable-prompt-tokens-details",
                       "--max-model-len", "1024", "--kv-transfer-config", json.dumps(config)],
                      tmp_path, name, env={"DS_WORKER_ADDR": w.address})
    prompt = long_prompt("hot", 60)
    a = start("a", False)
    try:
        want = complete(a, prompt)
        full_blocks = (want["usage"]["prompt_tokens"] - 1) // 16
        assert wait_for(lambda: total(a, "tandem_pool_connector_blocks_saved_total",
                                      outcome="stored") >= full_blocks, 10)
    finally:
        a.stop()
    assert w.metric("tandem_pool_soft_pinned_objects") == 0  # saving does not pin
    b = start("b", True)
    try:
        got = complete(b, prompt)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["usage"]["prompt_tokens_details"]["cached_tokens"] == full_blocks * 16
    finally:
        b.stop()
    assert w.metric("tandem_pool_soft_pinned_objects") == full_blocks
    for start_at in range(0, 32, 4):  # 8 MiB of colder objects through the 4 MiB arena
        assert tool(pool_tool, w, "put", "cold", 4, start=start_at)["stored"] == 4
    assert w.metric("tandem_pool_evictions_total") >= 16
    assert w.metric("tandem_pool_soft_pinned_objects") == full_blocks  # all still there
