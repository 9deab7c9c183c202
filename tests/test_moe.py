"""Sparse (MoE) models end to end with real processes: the glm4moe fixture (64 experts,
top-8, a shared expert, a leading dense layer, a NextN block), the deepseek2 one
(the same with MLA: latent KV blocks), the glm-dsa and deepseek32 ones (MLA plus
DeepSeek sparse attention: the indexer keys ride in the same KV rows) served colocated, and in
PD through `tandem proxy` with docs/DEPLOY.md's MultiConnector (Mooncake transfer + the pool
connector on a real pool worker and etcd); PD output equals colocated, and a second
engine reuses the first one's blocks through the pool; the same for a GLM-5-shaped Hugging
Face checkpoint directory in msmodelslim W8A8. Also: sparse GGUFs with missing,
misshapen or miscounted experts, or a glm-dsa / deepseek32 file with a missing or
misshapen indexer or a bad indexer key, are refused at load with exit 2 naming the problem."""
import json
import subprocess

import numpy as np
import pytest

from tandem_procs import Server, free_port
from test_pool import Etcd, Worker, wait_for
from test_proxy import Proxy, addr

MODEL = "glm4moe-q4_k_m.gguf"
# MLA (latent KV rows, no V rows) + YaRN + grouped sigmoid routing + a NextN block.
MLA_MODEL = "deepseek2-q4_k_m.gguf"
# MLA + the lightning indexer (top 16 positions per query; the prompts below are longer).
DSA_MODEL = "glm-dsa-q4_k_m.gguf"
# DeepSeek-V3.2: the indexer on every layer (NEOX RoPE in it), YaRN, grouped sigmoid routing.
DS32_MODEL = "deepseek32-q4_k_m.gguf"
# The seeds' model as they hold it: a GLM-5 (GlmMoeDsaForCausalLM) Hugging Face directory,
# msmodelslim W8A8 (static attention, dynamic experts) with its NextN layer.
HF_MODEL = "hf/glm-dsa-msmodelslim-w8a8"
COMMON = ["--served-model-name", "moe", "--enable-prompt-tokens-details", "--max-model-len", "512"]


def multi_config(role, kv_port=None):
    mooncake = {"kv_connector": "MooncakeConnectorV1", "kv_role": role,
                "kv_connector_extra_config": {"use_ascend_direct": True,
                                              "prefill": {"dp_size": 1, "tp_size": 1},
                                              "decode": {"dp_size": 1, "tp_size": 1}}}
    if kv_port is not None:
        mooncake["kv_port"] = str(kv_port)
    pool = {"kv_connector": "AscendStoreConnector", "kv_role": role,
            "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}}
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "engine_id": "0",
                       "kv_connector_extra_config": {"connectors": [mooncake, pool]}})


@pytest.fixture(scope="module", params=[MODEL, MLA_MODEL, DSA_MODEL, DS32_MODEL, HF_MODEL])
def moe_cluster(request, tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moe")
    model = fixture_dir / request.param
    procs = {}
    e = Etcd(tmp)
    try:
        worker = Worker(tandem_bin, tmp, e, name="w", shm_mb=64)
        env = {"DS_WORKER_ADDR": worker.address}
        procs["colocated"] = Server(tandem_bin, model, COMMON, tmp, "colocated")
        procs["p"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config",
                                                         multi_config("kv_producer", free_port())],
                            tmp, "p", env=env)
        procs["d"] = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", multi_config("kv_consumer")],
                            tmp, "d", env=env)
        procs["proxy"] = Proxy(tandem_bin, [addr(procs["p"])], [addr(procs["d"])], tmp)
        procs["worker"] = worker
        procs["model"] = model
        yield procs
    finally:
        for name in ("proxy", "d", "p", "colocated"):
            if name in procs:
                procs[name].stop()
        if "worker" in procs and procs["worker"].alive():
            procs["worker"].stop()
        e.stop()


def complete(server, prompt, max_tokens=12):
    r = server.post("/v1/completions", {"model": "moe", "prompt": prompt, "max_tokens": max_tokens,
                                        "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()


def test_moe_pd_through_the_proxy_equals_colocated(moe_cluster):
    colo, proxy, p, d = moe_cluster["colocated"], moe_cluster["proxy"], moe_cluster["p"], moe_cluster["d"]
    prompts = ["hello world", "The quick brown fox jumps over the lazy dog. " * 4,
               " ".join(f"w{i}" for i in range(60))]
    for prompt in prompts:
        want = complete(colo, prompt)
        got = proxy.client().completions.create(model="moe", prompt=prompt, max_tokens=12, temperature=0,
                                                extra_body={"ignore_eos": True})
        assert got.choices[0].text == want["choices"][0]["text"], prompt
        assert got.usage.completion_tokens == 12
    assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == len(prompts)
    # Streaming chat through the proxy, with the GGUF's GLM template.
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    want = colo.post("/v1/chat/completions", {"model": "moe", "messages": messages, "max_tokens": 8,
                                              "temperature": 0}).json()["choices"][0]["message"]["content"]
    stream = proxy.client().chat.completions.create(model="moe", messages=messages, max_tokens=8,
                                                    temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == want
    assert wait_for(lambda: p.metric("vllm:kv_cache_usage_perc") == 0, 10), "the producer freed its blocks"


def test_moe_blocks_are_shared_through_the_pool(moe_cluster, tandem_bin, fixture_dir, tmp_path):
    """The producer saved its full prompt blocks to the pool; a fresh engine on the same
    worker loads them (external hits) and continues with the same tokens."""
    colo, p, worker, model = (moe_cluster["colocated"], moe_cluster["p"], moe_cluster["worker"],
                              moe_cluster["model"])
    prompt = "pool " + " ".join(f"token{(i * 7919) % 1000}" for i in range(50))
    want = complete(colo, prompt)
    n_prompt = want["usage"]["prompt_tokens"]
    full_blocks = (n_prompt - 1) // 16
    pool_json = json.dumps({"kv_connector": "AscendStoreConnector", "kv_role": "kv_both",
                            "kv_connector_extra_config": {"lookup_rpc_port": "0", "backend": "yuanrong"}})
    a = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", pool_json], tmp_path, "a",
               env={"DS_WORKER_ADDR": worker.address})
    b = Server(tandem_bin, model, COMMON + ["--kv-transfer-config", pool_json], tmp_path, "b",
               env={"DS_WORKER_ADDR": worker.address})
    try:
        assert complete(a, prompt)["choices"][0]["text"] == want["choices"][0]["text"]
        assert wait_for(lambda: (a.metric("tandem_pool_connector_blocks_saved_total", outcome="stored") or 0)
                        + (a.metric("tandem_pool_connector_blocks_saved_total", outcome="exists") or 0)
                        >= full_blocks, 10)
        got = complete(b, prompt)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["usage"]["prompt_tokens_details"]["cached_tokens"] == full_blocks * 16
    finally:
        assert a.stop() == 0, a.log()[-2000:]
        assert b.stop() == 0, b.log()[-2000:]


# --- Bad sparse GGUFs --------------------------------------------------------------------


def rewrite(src, dst, drop=(), kv=None, reshape=None, drop_kv=()):
    """Copies GGUF `src` to `dst`, leaving out tensors in `drop` and metadata keys in
    `drop_kv`, overriding metadata `kv` (key -> (value, GGUFValueType[, element type])), and giving
    tensor `reshape[0]` the first reshape[1] rows of its last dimension."""
    import gguf
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    kv = kv or {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop_kv:
            continue
        if key in kv:
            value, vtype, *sub = kv[key]  # (value, type) or, for an array, (value, ARRAY, element type)
            writer.add_key_value(key, value, vtype, sub_type=sub[0] if sub else None)
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
    for t in reader.tensors:
        if t.name in drop:
            continue
        data = np.asarray(t.data)
        if reshape and t.name == reshape[0]:
            data = data[: reshape[1]]
        quantized = t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type if quantized else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def bad_cases():
    import gguf
    u32 = gguf.GGUFValueType.UINT32
    return {
        "missing expert tensor": (dict(drop=("blk.1.ffn_up_exps.weight",)), "blk.1.ffn_up_exps.weight"),
        "experts fewer than metadata": (dict(reshape=("blk.2.ffn_down_exps.weight", 32)),
                                        "blk.2.ffn_down_exps.weight"),
        "expert_count disagrees": (dict(kv={"glm4moe.expert_count": (48, u32)}), "ffn_gate_inp.weight"),
        "more used than experts": (dict(kv={"glm4moe.expert_used_count": (65, u32)}), "glm4moe.expert_used_count"),
        "missing selection bias": (dict(drop=("blk.1.exp_probs_b.bias",)), "blk.1.exp_probs_b.bias"),
        "missing shared expert": (dict(drop=("blk.2.ffn_gate_shexp.weight",)), "blk.2.ffn_gate_shexp.weight"),
    }


def check_bad_file_exits_2(tandem_bin, model, tmp_path, case, changes, needle):
    """`model` rewritten with `changes` makes `tandem generate` exit 2 naming `needle`."""
    dst = tmp_path / "bad.gguf"
    rewrite(model, dst, **changes)
    r = subprocess.run([tandem_bin, "generate", "--model", str(dst), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (case, r.returncode, r.stderr[-2000:])
    assert needle in r.stderr, (case, r.stderr[-2000:])


@pytest.mark.parametrize("case", ["missing expert tensor", "experts fewer than metadata", "expert_count disagrees",
                                  "more used than experts", "missing selection bias", "missing shared expert"])
def test_bad_sparse_gguf_exits_2_naming_the_problem(tandem_bin, fixture_dir, tmp_path, case):
    check_bad_file_exits_2(tandem_bin, fixture_dir / MODEL, tmp_path, case, *bad_cases()[case])


def bad_dsa_cases():
    import gguf
    u32 = gguf.GGUFValueType.UINT32
    return {
        "missing indexer key projection": (dict(drop=("blk.2.indexer.attn_k.weight",)),
                                           "blk.2.indexer.attn_k.weight"),
        "missing indexer norm bias": (dict(drop=("blk.0.indexer.k_norm.bias",)), "blk.0.indexer.k_norm.bias"),
        "indexer weights with too few heads": (dict(reshape=("blk.0.indexer.proj.weight", 4)),
                                               "blk.0.indexer.proj.weight"),
        "indexer key length disagrees": (dict(kv={"glm-dsa.attention.indexer.key_length": (128, u32)}),
                                         "blk.0.indexer.attn_q_b.weight"),
        "indexer key length not a power of two": (dict(kv={"glm-dsa.attention.indexer.key_length": (48, u32)}),
                                                  "glm-dsa.attention.indexer.key_length"),
        "no indexer top_k": (dict(drop_kv=("glm-dsa.attention.indexer.top_k",)), "glm-dsa.attention.indexer.top_k"),
        "first layer without its own indexer": (
            dict(kv={"glm-dsa.attention.indexer.types": ([False, True, True], gguf.GGUFValueType.ARRAY,
                                                         gguf.GGUFValueType.BOOL)}),
            "glm-dsa.attention.indexer.types"),
        "indexer types of the wrong length": (
            dict(kv={"glm-dsa.attention.indexer.types": ([True, True], gguf.GGUFValueType.ARRAY,
                                                         gguf.GGUFValueType.BOOL)}),
            "glm-dsa.attention.indexer.types"),
    }


@pytest.mark.parametrize("case", ["missing indexer key projection", "missing indexer norm bias",
                                  "indexer weights with too few heads", "indexer key length disagrees",
                                  "indexer key length not a power of two", "no indexer top_k",
                                  "first layer without its own indexer", "indexer types of the wrong length"])
def test_bad_glm_dsa_gguf_exits_2_naming_the_problem(tandem_bin, fixture_dir, tmp_path, case):
    check_bad_file_exits_2(tandem_bin, fixture_dir / DSA_MODEL, tmp_path, case, *bad_dsa_cases()[case])


def bad_deepseek32_cases():
    import gguf
    u32 = gguf.GGUFValueType.UINT32
    return {
        # Every layer has its own indexer (glm-dsa's Q4_K_M fixture shares layer 1's).
        "missing indexer on the middle layer": (dict(drop=("blk.1.indexer.proj.weight",)),
                                                "blk.1.indexer.proj.weight"),
        # llama.cpp requires the NextN block's indexer too (its MTP head does not run it).
        "missing NextN indexer": (dict(drop=("blk.3.indexer.attn_q_b.weight",)), "blk.3.indexer.attn_q_b.weight"),
        "misshapen indexer key norm": (dict(reshape=("blk.2.indexer.k_norm.weight", 32)),
                                       "blk.2.indexer.k_norm.weight"),
        "no gating function": (dict(drop_kv=("deepseek32.expert_gating_func",)), "deepseek32.expert_gating_func"),
        "gating function none": (dict(kv={"deepseek32.expert_gating_func": (0, u32)}),
                                 "deepseek32.expert_gating_func"),
        "not MLA": (dict(drop_kv=("deepseek32.attention.key_length_mla",)), "deepseek32.attention.key_length_mla"),
        "indexer key length not a power of two": (dict(kv={"deepseek32.attention.indexer.key_length": (96, u32)}),
                                                  "deepseek32.attention.indexer.key_length"),
        "no indexer heads": (dict(drop_kv=("deepseek32.attention.indexer.head_count",)),
                             "deepseek32.attention.indexer.head_count"),
    }


@pytest.mark.parametrize("case", list(bad_deepseek32_cases()))
def test_bad_deepseek32_gguf_exits_2_naming_the_problem(tandem_bin, fixture_dir, tmp_path, case):
    check_bad_file_exits_2(tandem_bin, fixture_dir / DS32_MODEL, tmp_path, case, *bad_deepseek32_cases()[case])


def test_glm_template_in_the_gguf_renders_tools_and_thinking(tandem_bin, fixture_dir, tmp_path):
    """The glm4moe fixture carries GLM-4.5's chat template (the one the template golden
    tests render as Jinja2 does): served with the glm45 tool and reasoning parsers, a
    chat with tools renders its tool block and special tokens, and completes."""
    s = Server(tandem_bin, fixture_dir / MODEL,
               COMMON + ["--enable-auto-tool-choice", "--tool-call-parser", "glm45", "--reasoning-parser", "glm45"],
               tmp_path, "glm")
    try:
        tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                   "parameters": {"type": "object",
                                                                  "properties": {"city": {"type": "string"}}}}}]
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        toks = s.post("/tokenize", {"messages": messages, "tools": tools}).json()["tokens"]
        text = s.post("/detokenize", {"tokens": toks}).json()["prompt"]
        assert text.startswith("[gMASK]<sop>") and "<|system|>\n# Tools" in text and "get_weather" in text
        assert text.rstrip().endswith("<|assistant|>"), text[-80:]
        user_id = s.post("/tokenize", {"prompt": "<|user|>", "add_special_tokens": False}).json()["tokens"]
        assert len(user_id) == 1 and user_id[0] in toks, "special tokens are single tokens"
        no_think = s.post("/tokenize", {"messages": messages,
                                        "chat_template_kwargs": {"enable_thinking": False}}).json()["tokens"]
        assert "/nothink" in s.post("/detokenize", {"tokens": no_think}).json()["prompt"]
        r = s.post("/v1/chat/completions", {"model": "moe", "messages": messages, "tools": tools,
                                            "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        msg = r.json()["choices"][0]["message"]
        assert msg["role"] == "assistant" and (msg.get("content") is not None or msg.get("tool_calls"))
    finally:
        assert s.stop() == 0, s.log()[-2000:]
