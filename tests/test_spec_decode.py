"""Speculative decoding (ngram prompt lookup, draft model, MTP) through the HTTP API of real `tandem serve`
processes: greedy outputs equal those of a server without speculation, vLLM's
spec-decode metrics count drafts, and bad --speculative-config values exit 2."""
import json
import subprocess

import pytest

from tandem_procs import Server

SPEC = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3})
COMMON = ["--served-model-name", "fixture", "--max-model-len", "512"]


def kv_config(role, port=None):
    """A --kv-transfer-config for a P (kv_producer, with its transfer port) or a D."""
    c = {"kv_connector": "MooncakeConnectorV1", "kv_role": role, "engine_id": "0"}
    if port:
        c["kv_port"] = str(port)
    return json.dumps(c)


def test_ngram_greedy_equals_no_speculation(tandem_bin, fixture_dir, tmp_path):
    model = fixture_dir / "gemma3.gguf"
    plain = Server(tandem_bin, model, COMMON, tmp_path, "plain")
    try:
        spec = Server(tandem_bin, model, [*COMMON, "--speculative-config", SPEC], tmp_path, "spec")
    except Exception:
        plain.stop()
        raise
    try:
        prompts = [" ".join(["alpha beta gamma delta"] * 6), "1 2 3 1 2 3 1 2 3 1 2", "x"]
        for stream in (False, True):
            for prompt in prompts:
                body = {"model": "fixture", "prompt": prompt, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
                want = plain.post("/v1/completions", body).json()["choices"][0]["text"]
                if not stream:
                    got = spec.post("/v1/completions", body).json()["choices"][0]["text"]
                else:
                    r = spec.post("/v1/completions", dict(body, stream=True), stream=True)
                    got = ""
                    for line in r.iter_lines():
                        if line.startswith(b"data: {"):
                            got += json.loads(line[6:])["choices"][0]["text"]
                assert got == want, prompt
        drafted = spec.metric("vllm:spec_decode_num_draft_tokens_total")
        accepted = spec.metric("vllm:spec_decode_num_accepted_tokens_total")
        assert drafted and accepted and 0 < accepted <= drafted
        assert spec.metric("vllm:spec_decode_num_drafts_total") > 0
        assert spec.metric("vllm:spec_decode_num_accepted_tokens_per_pos_total", position="0") > 0
        assert plain.metric("vllm:spec_decode_num_drafts_total") is None
    finally:
        plain.stop()
        spec.stop()


@pytest.mark.parametrize("config,needle", [
    ('{"method": "magic", "num_speculative_tokens": 3}', "magic"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens"),
    ('{"method": "ngram", "num_speculative_tokens": 17}', "num_speculative_tokens"),
    ('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2}',
     "prompt_lookup_min"),
    ('{"method": "draft_model", "model": "/nonexistent.gguf", "num_speculative_tokens": 2}', "/nonexistent.gguf"),
    ('{bad', "--speculative-config"),
])
def test_bad_speculative_config_exits_2(tandem_bin, fixture_dir, config, needle):
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--speculative-config", config],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert needle in r.stderr


def test_draft_model_greedy_equals_no_speculation(tandem_bin, fixture_dir, tmp_path):
    """A MoE target with a dense draft of the same vocabulary, and with itself as the
    draft (every greedy draft then accepted): the same text as without speculation."""
    model = fixture_dir / "qwen3moe-q8_0.gguf"
    servers = []
    try:
        plain = Server(tandem_bin, model, COMMON, tmp_path, "plain")
        servers.append(plain)
        for name in ("qwen3.gguf", "qwen3moe-q8_0.gguf"):
            config = json.dumps({"method": "draft_model", "model": str(fixture_dir / name), "num_speculative_tokens": 3})
            spec = Server(tandem_bin, model, [*COMMON, "--speculative-config", config], tmp_path, "spec-" + name)
            servers.append(spec)
            assert "draft model" in spec.log()
            for prompt in ["alpha beta gamma delta alpha beta", "1 2 3", "x"]:
                body = {"model": "fixture", "prompt": prompt, "max_tokens": 32, "temperature": 0, "ignore_eos": True}
                want = plain.post("/v1/completions", body).json()["choices"][0]["text"]
                got = spec.post("/v1/completions", body).json()["choices"][0]["text"]
                assert got == want, (name, prompt)
            drafted = spec.metric("vllm:spec_decode_num_draft_tokens_total")
            accepted = spec.metric("vllm:spec_decode_num_accepted_tokens_total")
            assert drafted and drafted > 0
            if name == "qwen3moe-q8_0.gguf":
                assert accepted == drafted
    finally:
        for s in servers:
            s.stop()


def test_draft_model_on_the_default_model_and_on_the_decode_instance_of_pd(tandem_bin, default_model, tmp_path):
    """The default model (262,144-token vocabulary) drafting for itself: every greedy draft
    is accepted and the text is unchanged; as the decode instance of PD (P without
    speculation), D's text equals a colocated engine's."""
    from tandem_procs import free_port
    config = json.dumps({"method": "draft_model", "model": str(default_model), "num_speculative_tokens": 3})
    common = ["--served-model-name", "fixture", "--max-model-len", "1024"]

    procs = []
    try:
        colo = Server(tandem_bin, default_model, common, tmp_path, "colo")
        procs.append(colo)
        p = Server(tandem_bin, default_model, [*common, "--kv-transfer-config", kv_config("kv_producer", free_port())],
                   tmp_path, "p")
        procs.append(p)
        d = Server(tandem_bin, default_model, [*common, "--kv-transfer-config", kv_config("kv_consumer"),
                                               "--speculative-config", config], tmp_path, "d")
        procs.append(d)
        for prompt in ["The capital of France is", "Count: one, two, three,"]:
            body = {"model": "fixture", "prompt": prompt, "max_tokens": 24, "temperature": 0, "ignore_eos": True}
            want = colo.post("/v1/completions", body).json()["choices"][0]["text"]
            assert d.post("/v1/completions", body).json()["choices"][0]["text"] == want, prompt
            first = p.post("/v1/completions", dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
            params = first.json()["kv_transfer_params"]
            got = d.post("/v1/completions", dict(body, kv_transfer_params=params)).json()["choices"][0]["text"]
            assert got == want, prompt
        drafted = d.metric("vllm:spec_decode_num_draft_tokens_total")
        assert drafted and d.metric("vllm:spec_decode_num_accepted_tokens_total") == drafted
        assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == 2
    finally:
        for proc in reversed(procs):
            proc.stop()


def test_draft_model_with_another_vocabulary_exits_2(tandem_bin, fixture_dir):
    config = json.dumps({"method": "draft_model", "model": str(fixture_dir / "llama.gguf"), "num_speculative_tokens": 2})
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "qwen3.gguf"), "--speculative-config", config],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "vocabulary" in r.stderr and "model" in r.stderr


def test_mtp_needs_nextn_layers(tandem_bin, fixture_dir):
    r = subprocess.run([tandem_bin, "serve", str(fixture_dir / "llama.gguf"), "--speculative-config",
                        '{"num_speculative_tokens": 3, "method": "deepseek_mtp"}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "NextN" in r.stderr and "--speculative-config" in r.stderr


@pytest.mark.parametrize("model_name", ["glm4moe-q4_k_m.gguf", "hf/glm4moe"])
def test_mtp_greedy_equals_no_speculation_colocated_and_pd(tandem_bin, fixture_dir, tmp_path, model_name):
    """The deployment's MTP config (docs/DEPLOY.md) on a glm4moe fixture with a NextN block (a GGUF, and a
    Hugging Face checkpoint directory whose NextN layer drafts): colocated, and as PD
    (P and D both with MTP, as that deployment runs them; the NextN layer's KV rows travel in
    the blocks), the text equals a server's without speculation."""
    from tandem_procs import free_port
    model = fixture_dir / model_name
    mtp = ["--speculative-config", '{"num_speculative_tokens": 3, "method": "deepseek_mtp"}']

    procs = []
    try:
        plain = Server(tandem_bin, model, COMMON, tmp_path, "plain")
        procs.append(plain)
        colo = Server(tandem_bin, model, [*COMMON, *mtp], tmp_path, "colo")
        procs.append(colo)
        p = Server(tandem_bin, model, [*COMMON, *mtp, "--kv-transfer-config", kv_config("kv_producer", free_port())],
                   tmp_path, "p")
        procs.append(p)
        d = Server(tandem_bin, model, [*COMMON, *mtp, "--kv-transfer-config", kv_config("kv_consumer")], tmp_path, "d")
        procs.append(d)
        for prompt in ["alpha beta gamma delta alpha beta gamma", "1 2 3 1 2 3 1 2", "x"]:
            body = {"model": "fixture", "prompt": prompt, "max_tokens": 32, "temperature": 0, "ignore_eos": True}
            want = plain.post("/v1/completions", body).json()["choices"][0]["text"]
            assert colo.post("/v1/completions", body).json()["choices"][0]["text"] == want, prompt
            first = p.post("/v1/completions", dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
            params = first.json()["kv_transfer_params"]
            got = d.post("/v1/completions", dict(body, kv_transfer_params=params)).json()["choices"][0]["text"]
            assert got == want, prompt
        assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == 3
        for s in (colo, d):
            drafted = s.metric("vllm:spec_decode_num_draft_tokens_total")
            assert drafted and drafted > 0
            assert s.metric("vllm:spec_decode_num_accepted_tokens_total") <= drafted
    finally:
        for proc in reversed(procs):
            proc.stop()


def test_ngram_on_the_decode_instance_of_pd(tandem_bin, fixture_dir, tmp_path):
    """PD with speculation on D: P prefills (one token, no drafts), D pulls the KV and
    decodes with drafts; the text equals a colocated engine's without speculation."""
    from tandem_procs import free_port
    model = fixture_dir / "gemma3.gguf"

    procs = []
    try:
        colo = Server(tandem_bin, model, COMMON, tmp_path, "colo")
        procs.append(colo)
        p = Server(tandem_bin, model, [*COMMON, "--kv-transfer-config", kv_config("kv_producer", free_port()),
                                       "--speculative-config", SPEC], tmp_path, "p")
        procs.append(p)
        d = Server(tandem_bin, model, [*COMMON, "--kv-transfer-config", kv_config("kv_consumer"),
                                       "--speculative-config", SPEC], tmp_path, "d")
        procs.append(d)
        for prompt in [" ".join(["alpha beta gamma delta"] * 6), "1 2 3 1 2 3 1 2 3 1 2"]:
            body = {"model": "fixture", "prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
            want = colo.post("/v1/completions", body).json()["choices"][0]["text"]
            first = p.post("/v1/completions", dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
            params = first.json()["kv_transfer_params"]
            got = d.post("/v1/completions", dict(body, kv_transfer_params=params)).json()["choices"][0]["text"]
            assert got == want, prompt
        assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == 2
        assert d.metric("vllm:spec_decode_num_accepted_tokens_total") > 0
        assert not p.metric("vllm:spec_decode_num_drafts_total")  # the prefill instance drafts nothing
    finally:
        for proc in reversed(procs):
            proc.stop()
