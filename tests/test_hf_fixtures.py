"""The Hugging Face checkpoint fixtures (tools/make_hf_fixtures.py) and, where llama.cpp's
converter ran (scripts/convert_hf_reference.sh), the reference GGUFs made from them.

Fixtures: $TANDEM_FIXTURE_DIR/hf/ when test.sh made them, else written here into a
temporary folder. Reference GGUFs: $TANDEM_FIXTURE_DIR/hf-gguf/; those tests skip, saying
why, when the opt-in converter environment is not set up.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import make_hf_fixtures  # noqa: E402

# safetensors' NumPy loader looks the FP8 type up on numpy; ml_dtypes provides it.
np.float8_e4m3fn = ml_dtypes.float8_e4m3fn
from safetensors import safe_open  # noqa: E402

NAMES = [f.name for f in make_hf_fixtures.FIXTURES]
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I8": 1, "I32": 4, "I64": 8, "F8_E4M3": 1}
GGUF_ARCH = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
             "Gemma3ForCausalLM": "gemma3", "Qwen3MoeForCausalLM": "qwen3moe", "Glm4MoeForCausalLM": "glm4moe",
             "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2",
             "DeepseekV32ForCausalLM": "deepseek32", "GlmMoeDsaForCausalLM": "glm-dsa"}
FIXTURE_ENV = pathlib.Path(os.environ.get("TANDEM_FIXTURE_DIR", ROOT / "build" / "fixtures"))


@pytest.fixture(scope="session")
def hf_dir(tmp_path_factory):
    path = FIXTURE_ENV / "hf"
    if all((path / n / "config.json").exists() for n in NAMES):
        return path
    path = tmp_path_factory.mktemp("hf")
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_hf_fixtures.py"), str(path)], check=True,
                   stdout=subprocess.DEVNULL)
    return path


def index_of(d: pathlib.Path) -> pathlib.Path:
    found = sorted(d.glob("*.safetensors.index.json"))
    assert len(found) == 1, f"{d}: index files {found}"
    return found[0]


def load_all(d: pathlib.Path) -> dict[str, np.ndarray]:
    out = {}
    for shard in sorted(d.glob("*.safetensors")):
        with safe_open(str(shard), "np") as f:
            for k in f.keys():
                out[k] = f.get_tensor(k)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_shards_match_index(hf_dir, name):
    d = hf_dir / name
    index = json.loads(index_of(d).read_text())
    stem = index_of(d).name.removesuffix(".safetensors.index.json")
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 2
    assert files == sorted(p.name for p in d.glob("*.safetensors"))
    for k, f in enumerate(files):
        assert f == f"{stem}-{k + 1:05d}-of-{len(files):05d}.safetensors"
    total = 0
    for f in files:
        with safe_open(str(d / f), "np") as h:
            assert h.metadata() == {"format": "pt"}
            assert sorted(h.keys()) == sorted(t for t, s in index["weight_map"].items() if s == f)
            for k in h.keys():
                s = h.get_slice(k)
                total += int(np.prod(s.get_shape(), dtype=np.int64)) * DTYPE_BYTES[s.get_dtype()]
                assert h.get_tensor(k).shape == tuple(s.get_shape())
    assert index["metadata"]["total_size"] == total


@pytest.mark.parametrize("name", NAMES)
def test_config_tokenizer_and_generation(hf_dir, name):
    from tokenizers import Tokenizer

    d = hf_dir / name
    config = json.loads((d / "config.json").read_text())
    weights = load_all(d)
    emb = weights["model.embed_tokens.weight"]
    assert emb.shape == (config["vocab_size"], config["hidden_size"])
    assert str(emb.dtype) == ("float16" if config["torch_dtype"] == "float16" else "bfloat16")
    assert ("lm_head.weight" in weights) == (not config["tie_word_embeddings"])
    for i in range(config.get("num_nextn_predict_layers", 0)):
        p = f"model.layers.{config['num_hidden_layers'] + i}."
        for t in ("eh_proj.weight", "enorm.weight", "hnorm.weight", "shared_head.norm.weight",
                  "shared_head.head.weight", "embed_tokens.weight"):
            assert p + t in weights
    if "e_score_correction_bias" in " ".join(weights):
        assert weights["model.layers.1.mlp.gate.e_score_correction_bias"].dtype == np.float32
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    assert tok.get_vocab_size() <= config["vocab_size"]
    assert json.loads((d / "tokenizer_config.json").read_text())["chat_template"]
    gen = json.loads((d / "generation_config.json").read_text())
    assert {"temperature", "top_p", "top_k"} <= gen.keys()
    eos = config["eos_token_id"]
    assert gen["eos_token_id"] == (eos if isinstance(eos, list) else [eos])
    assert all(tok.id_to_token(i) is not None for i in gen["eos_token_id"])


def test_quantized_variants_hold_the_same_weights(hf_dir):
    bf16 = {n: load_all(hf_dir / n) for n in ("llama", "qwen3moe", "deepseek-v3", "glm-dsa")}

    def ref(base, name):
        return bf16[base][name].astype(np.float32)

    # compressed-tensors: I8 x BF16 per-channel scale, within half a step of the weight.
    for base, q in (("llama", "llama-w8a8"), ("qwen3moe", "qwen3moe-w8a8")):
        w = load_all(hf_dir / q)
        for name, t in w.items():
            if t.dtype == np.int8:
                m = name.removesuffix(".weight")
                s = w[m + ".weight_scale"]
                assert s.dtype == ml_dtypes.bfloat16 and s.shape == (t.shape[0], 1)
                err = np.abs(t * s.astype(np.float32) - ref(base, name))
                assert (err <= 0.5 * s.astype(np.float32) + 1e-6).all(), name
        assert w["model.layers.0.mlp.gate.weight" if base == "qwen3moe" else "lm_head.weight"].dtype == ml_dtypes.bfloat16

    # msmodelslim W8A8 static: (xq . W + quant_bias) x deq_scale is x . w to int8 accuracy.
    rng = np.random.default_rng(0)
    for base, q in (("llama", "llama-msmodelslim-w8a8"), ("glm-dsa", "glm-dsa-msmodelslim-w8a8")):
        d = hf_dir / q
        desc = json.loads((d / "quant_model_description.json").read_text())
        w = load_all(d)
        assert set(desc) - {"model_quant_type", "version"} == set(w)
        assert {"W8A8"} <= set(desc.values())
        for name in (n for n, v in desc.items() if v == "W8A8" and n.endswith(".weight")):
            m = name.removesuffix(".weight")
            deq = w[m + ".deq_scale"]
            deq = deq.astype(np.int32).view(np.float32) if deq.dtype == np.int64 else deq
            x = rng.uniform(-3, 3, (4, w[name].shape[1])).astype(np.float32)
            xq = np.clip(np.rint(x / w[m + ".input_scale"][0] + w[m + ".input_offset"][0]), -128, 127)
            y = (xq.astype(np.int64) @ w[name].astype(np.int64).T + w[m + ".quant_bias"]) * deq
            want = x @ ref(base, name).T
            assert np.abs(y - want).max() <= 0.05 * np.abs(want).max(), name

    # FP8 block-scaled: within e4m3's half step (1/16 relative) of the block's values.
    w = load_all(hf_dir / "deepseek-v3-fp8")
    for name, t in w.items():
        if t.dtype == ml_dtypes.float8_e4m3fn:
            inv = w[name.removesuffix(".weight") + ".weight_scale_inv"]
            assert inv.shape == (-(-t.shape[0] // 128), -(-t.shape[1] // 128))
            scale = np.repeat(np.repeat(inv, 128, 0), 128, 1)[:t.shape[0], :t.shape[1]]
            r = ref("deepseek-v3", name)
            assert np.abs(t.astype(np.float32) * scale - r).max() <= np.abs(r).max() / 16, name


def expected_gguf_tensors(config: dict, names: list[str]) -> int:
    """The tensor count llama.cpp's converter writes for a checkpoint: quantization scales
    folded into their weights, per-expert matrices stacked (3 per MoE layer), kv_b_proj
    split into k_b and v_b, rope_freqs added for Llama 3 RoPE scaling, and DeepSeek-V2/V3's
    NextN layers dropped (the converter skips them for that class)."""
    n_layers = config["num_hidden_layers"]
    arch = config["architectures"][0]
    out = set()
    for n in names:
        if re.search(r"\.(weight_scale|weight_scale_inv|weight_offset|input_scale|input_offset|deq_scale|quant_bias)$", n):
            continue
        m = re.match(r"model\.layers\.(\d+)\.", n)
        if m and int(m.group(1)) >= n_layers and arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
            continue
        n = re.sub(r"mlp\.experts\.\d+\.", "mlp.experts.", n)
        if n.endswith("kv_b_proj.weight"):
            out.update({n + ".k_b", n + ".v_b"})
        else:
            out.add(n)
    extra = 1 if (config.get("rope_scaling") or {}).get("rope_type") == "llama3" else 0
    return len(out) + extra


@pytest.mark.parametrize("name", NAMES)
def test_reference_gguf(hf_dir, name):
    gguf = pytest.importorskip("gguf")
    d = hf_dir / name
    if not list(d.glob("model*.safetensors")):
        pytest.skip("msmodelslim layout: llama.cpp's converter reads only model*.safetensors "
                    "and has no msmodelslim dequantization")
    gguf_dir = FIXTURE_ENV / "hf-gguf"
    path = gguf_dir / f"{name}.gguf"
    if not path.exists():
        pytest.skip(f"no reference GGUF {path}: llama.cpp's converter is opt-in "
                    "(scripts/convert_hf_reference.sh --setup needs torch + transformers, about 5 GB)")
    config = json.loads((d / "config.json").read_text())
    names = list(json.loads(index_of(d).read_text())["weight_map"])
    for p in (path, gguf_dir / f"{name}-q8_0.gguf"):
        if not p.exists():
            continue
        r = gguf.GGUFReader(str(p))
        arch = r.fields["general.architecture"].contents()
        assert arch == GGUF_ARCH[config["architectures"][0]]
        assert len(r.tensors) == expected_gguf_tensors(config, names), p.name
        vocab = r.fields.get(f"{arch}.vocab_size")
        if vocab is not None:
            assert vocab.contents() == config["vocab_size"]
