"""The KV-pool connector in the engine, end to end with real processes: etcd, two pool
workers (two "nodes": 127.0.0.1 and 127.0.0.2 when the loopback answers there) and two
engines, each on its own worker. Engine B reuses what engine A computed through the pool
(external prefix-cache hits, a worker-to-worker fetch), with the same greedy output; a
pool worker killed with -9 under load costs no request; a restarted worker rejoins and
hits resume."""
import concurrent.futures
import json
import time

import pytest

from tandem_procs import Server
from test_pool import Worker, etcd, loopback2_available, wait_for  # noqa: F401 (etcd is a fixture)

def pool_config(load_async):
    return json.dumps({
        "kv_connector": "MultiConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"connectors": [
            {"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
             "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong",
                                           "load_async": load_async}}]}})


def engine(tandem_bin, fixture_dir, tmp_path, worker, name, load_async=False, extra=()):
    return Server(tandem_bin, fixture_dir / "llama.gguf",
                  ["--served-model-name", "fixture", "--enable-prompt-tokens-details", "--max-model-len", "1024",
                   "--kv-transfer-config", pool_config(load_async), *extra],
                  tmp_path, name, env={"DS_WORKER_ADDR": worker.address})


def complete(server, prompt, max_tokens=8):
    r = server.post("/v1/completions", {"model": "fixture", "prompt": prompt, "max_tokens": max_tokens,
                                        "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()


def long_prompt(tag, words=40):
    return f"{tag}: " + " ".join(f"token{(i * 7919) % 1000}" for i in range(words))


def total(server, name, **labels):
    return server.metric(name, **labels) or 0.0


@pytest.fixture
def two_nodes(request, tandem_bin, fixture_dir, tmp_path, etcd):  # noqa: F811
    """Engine A on worker 1, engine B on worker 2; B loads in the step, or on its pull
    threads (`load_async`) when the test is marked so."""
    load_async = request.node.get_closest_marker("load_async") is not None
    host2 = "127.0.0.2" if loopback2_available() else "127.0.0.1"
    w1 = Worker(tandem_bin, tmp_path, etcd, name="w1", shm_mb=64)
    w2 = Worker(tandem_bin, tmp_path, etcd, host=host2, name="w2", shm_mb=64)
    a = engine(tandem_bin, fixture_dir, tmp_path, w1, "a")
    b = engine(tandem_bin, fixture_dir, tmp_path, w2, "b", load_async=load_async)
    yield w1, w2, a, b
    a.stop()
    b.stop()
    for w in (w1, w2):
        if w.alive():
            w.stop()


def test_engine_b_reuses_engine_a_prefix_through_the_pool(two_nodes):
    w1, w2, a, b = two_nodes
    prompt = long_prompt("shared")
    want = complete(a, prompt)
    n_prompt = want["usage"]["prompt_tokens"]
    full_blocks = (n_prompt - 1) // 16
    assert wait_for(lambda: total(a, "tandem_pool_connector_blocks_saved_total", outcome="stored") >= full_blocks, 10)
    hits_before = total(b, "vllm:external_prefix_cache_hits_total")
    got = complete(b, prompt)
    assert got["choices"][0]["text"] == want["choices"][0]["text"]
    assert total(b, "vllm:external_prefix_cache_hits_total") - hits_before == full_blocks * 16
    assert got["usage"]["prompt_tokens_details"]["cached_tokens"] == full_blocks * 16
    assert total(b, "tandem_pool_connector_blocks_loaded_total", source="remote") == full_blocks, \
        "the blocks live on A's worker: B's worker fetched them"
    assert total(b, "vllm:external_prefix_cache_queries_total") >= n_prompt
    # A second engine on the same node as the data gets local pool hits.
    got_a_again = complete(a, prompt)
    assert got_a_again["choices"][0]["text"] == want["choices"][0]["text"]


@pytest.mark.load_async
def test_pool_worker_kill9_costs_no_request_and_rejoin_resumes_hits(two_nodes):
    w1, w2, a, b = two_nodes
    prompts = [long_prompt(f"p{i}", 30) for i in range(6)]
    wants = [complete(a, p, 6)["choices"][0]["text"] for p in prompts]
    time.sleep(0.5)
    # B loads from the pool while its worker dies under it: every request still succeeds.
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        futures = [ex.submit(complete, b, p, 6) for p in prompts]
        time.sleep(0.05)
        w2.kill9()
        results = [f.result(timeout=120) for f in futures]
    assert [r["choices"][0]["text"] for r in results] == wants
    # More requests while the worker is gone: still fine (recompute).
    assert complete(b, long_prompt("alone", 15), 4)["usage"]["completion_tokens"] == 4
    # The worker comes back at the same address and rejoins etcd; hits resume once the
    # connector's back-off has passed.
    w2.start()
    assert wait_for(lambda: w2.address in w1.etcd.workers(), 15)
    fresh = long_prompt("after-restart", 30)
    want = complete(a, fresh, 6)
    full_blocks = (want["usage"]["prompt_tokens"] - 1) // 16
    assert wait_for(lambda: total(a, "tandem_pool_connector_blocks_saved_total", outcome="stored") > 0, 10)
    deadline = time.time() + 20
    gained = 0
    while time.time() < deadline and gained == 0:
        before = total(b, "vllm:external_prefix_cache_hits_total")
        got = complete(b, fresh, 6)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        gained = total(b, "vllm:external_prefix_cache_hits_total") - before
        if gained == 0:
            # B has it locally now; ask with a new prompt A computed.
            fresh = long_prompt(f"after-restart-{time.time()}", 30)
            want = complete(a, fresh, 6)
            time.sleep(1)
    assert gained >= 16, "pool hits resumed after the worker rejoined"
