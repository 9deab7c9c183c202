"""Hugging Face checkpoint directories (tools/make_hf_fixtures.py writes them into
$TANDEM_FIXTURE_DIR/hf/) read by `tandem` directly:

- float checkpoints give the logits, bit for bit, of the same directory converted by
  llama.cpp's own convert_hf_to_gguf.py ($TANDEM_FIXTURE_DIR/hf-gguf/, written when the
  opt-in converter environment is set up: scripts/convert_hf_reference.sh --setup; the
  tests say so when it is not);
- W8A8 checkpoints (compressed-tensors, msmodelslim dynamic and static) compute a
  layer's int8 projection as each format defines it (numpy, from the safetensors), and
  their perplexity is within 1% of the BF16 checkpoint they were quantized from; FP8 too;
- the chat template, generation_config.json and the glm45 / glm47 parsers come from the
  directory;
- bad directories exit 2 naming the file, tensor or key.
"""
import json
import shutil
import subprocess

import ml_dtypes  # noqa: F401  (numpy's bfloat16, for the shards' BF16 tensors)
import numpy as np
import pytest
from safetensors.numpy import load_file

from tandem_procs import Server

FLOAT = ["llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "glm4moe", "deepseek-v2", "deepseek-v3",
         "deepseek-v32", "glm-dsa"]


def gguf_for_tokens(gguf, tmp_path):
    """The converter names DeepSeek-V3's pre-tokenizer "deepseek-v3", which Tandem's GGUF
    tokenizer does not implement; the logits of given token ids do not depend on it, so
    the comparison reads a copy with the name (11 bytes) replaced by another of 11 bytes."""
    data = gguf.read_bytes()
    old = (11).to_bytes(8, "little") + b"deepseek-v3"
    if old not in data:
        return gguf
    copy = tmp_path / gguf.name
    copy.write_bytes(data.replace(old, (11).to_bytes(8, "little") + b"chatglm-bpe", 1))
    return copy
TOKENS = "1,5,9,13,2,7,11,3,17,19,23,29,31,37"


def hf(fixture_dir, name):
    path = fixture_dir / "hf" / name
    if not (path / "config.json").exists():
        pytest.fail(f"fixture {path} is missing: run tools/make_hf_fixtures.py {fixture_dir / 'hf'}")
    return path


def dump(tandem_bin, model, out, names="result_output", tokens=TOKENS):
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([tandem_bin, "dump-tensors", "--model", str(model), "--tokens", tokens,
                        "--names", names, "--out", str(out), "--threads", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stderr


@pytest.mark.parametrize("name", FLOAT)
def test_logits_equal_the_converted_gguf(tandem_bin, fixture_dir, tmp_path, name):
    gguf = fixture_dir / "hf-gguf" / f"{name}.gguf"
    if not gguf.exists():
        pytest.skip(f"no {gguf}: llama.cpp's converter is opt-in (scripts/convert_hf_reference.sh --setup, "
                    "then test.sh converts the fixtures)")
    dump(tandem_bin, hf(fixture_dir, name), tmp_path / "hf")
    dump(tandem_bin, gguf_for_tokens(gguf, tmp_path), tmp_path / "gguf")
    a = np.load(tmp_path / "hf" / "result_output.npy")
    b = np.load(tmp_path / "gguf" / "result_output.npy")
    assert a.shape == b.shape
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), \
        f"max |diff| {np.abs(a - b).max()} over {np.count_nonzero(a != b)} values"


def bf16_to_f32(a):
    return a.astype(np.float32)


def tensors_of(ckpt):
    out = {}
    for f in sorted(ckpt.glob("*.safetensors")):
        out.update(load_file(f))
    return out


def quantize_rows_dynamic(x):
    """vLLM's dynamic per-token symmetric int8 (scaled_int8_quant): s = max|x| / 127,
    q = round-half-even(x * (127 / max|x|)), in float32."""
    amax = np.abs(x).max(axis=1, keepdims=True).astype(np.float32)
    s = amax / np.float32(127)
    inv = np.where(amax == 0, np.float32(0), np.float32(127) / np.where(amax == 0, np.float32(1), amax))
    q = np.clip(np.rint(x * inv), -128, 127)
    return q, s


# o_proj of layer 0 (kqv_out-0 -> attn_out-0), each format's arithmetic in numpy in
# float64 from the int8 values; Tandem's int32 dot and float scaling must agree to a
# relative 1e-4 of the output's scale (float32 rounding of the scale products).
@pytest.mark.parametrize("name", ["llama-w8a8", "llama-msmodelslim-w8a8"])
def test_int8_projection_matches_the_formats_arithmetic(tandem_bin, fixture_dir, tmp_path, name):
    ckpt = hf(fixture_dir, name)
    dump(tandem_bin, ckpt, tmp_path, names="kqv_out-0,attn_out-0")
    x = np.load(tmp_path / "kqv_out-0.npy").astype(np.float64)
    got = np.load(tmp_path / "attn_out-0.npy").astype(np.float64)
    t = tensors_of(ckpt)
    p = "model.layers.0.self_attn.o_proj."
    w = t[p + "weight"].astype(np.float64)
    assert t[p + "weight"].dtype == np.int8
    if p + "deq_scale" in t:  # msmodelslim static: y = (xq . W + quant_bias) * deq_scale
        scale = float(bf16_to_f32(t[p + "input_scale"]).reshape(-1)[0])
        offset = float(bf16_to_f32(t[p + "input_offset"]).reshape(-1)[0])
        xq = np.clip(np.rint(x / scale + offset), -128, 127)
        deq = t[p + "deq_scale"]
        deq = deq.astype(np.int64).astype(np.uint32).view(np.float32) if deq.dtype == np.int64 else bf16_to_f32(deq)
        bias = t.get(p + "quant_bias", np.zeros(w.shape[0], np.int32)).astype(np.float64)
        want = (xq @ w.T + bias) * deq.astype(np.float64).reshape(-1)
    else:  # dynamic: y = s_x * s_w * (xq . (W - offset))
        xq, sx = quantize_rows_dynamic(x.astype(np.float32))
        sw = bf16_to_f32(t[p + "weight_scale"]).astype(np.float64).reshape(-1)
        off = bf16_to_f32(t[p + "weight_offset"]).astype(np.float64).reshape(-1) if p + "weight_offset" in t else 0
        want = (xq.astype(np.float64) @ (w - np.reshape(off, (-1, 1))).T) * sx.astype(np.float64) * sw
    tol = 1e-4 * np.abs(want).max() + 1e-6
    assert np.abs(got - want).max() <= tol, f"max |diff| {np.abs(got - want).max()} > {tol}"


def perplexity(tandem_bin, model, text_file):
    r = subprocess.run([tandem_bin, "perplexity", "--model", str(model), "--file", str(text_file), "--ctx", "64",
                        "--threads", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    line = [l for l in (r.stdout + r.stderr).splitlines() if "Final estimate: PPL" in l]
    assert line, r.stdout + r.stderr
    return float(line[-1].split("PPL = ")[1].split()[0])


@pytest.mark.parametrize("quantized,base", [("llama-w8a8", "llama"), ("llama-msmodelslim-w8a8", "llama"),
                                            ("qwen3moe-w8a8", "qwen3moe"),
                                            ("qwen3moe-msmodelslim-w8a8-dynamic", "qwen3moe"),
                                            ("glm-dsa-msmodelslim-w8a8", "glm-dsa")])
def test_quantized_perplexity_is_within_one_percent(tandem_bin, fixture_dir, tmp_path, quantized, base):
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"the {w} of {i % 7} and" for i, w in enumerate(["cat", "dog", "bird", "fish"] * 40)))
    q = perplexity(tandem_bin, hf(fixture_dir, quantized), text)
    b = perplexity(tandem_bin, hf(fixture_dir, base), text)
    assert abs(q / b - 1) < 0.01, f"{quantized} PPL {q} vs {base} {b}"


def test_fp8_checkpoint_perplexity(tandem_bin, fixture_dir, tmp_path):
    """FP8 (e4m3, 3 mantissa bits) is lossy by itself: the fixture's BF16 twin is within
    3%. Tandem stores the dequantized weights as Q8_0 (int8 dots, int8 activations),
    within 2% of llama.cpp's conversion of the same FP8 weights to BF16 (float dots)."""
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"the {w} of {i % 7} and" for i, w in enumerate(["cat", "dog", "bird", "fish"] * 40)))
    q = perplexity(tandem_bin, hf(fixture_dir, "glm-dsa-fp8"), text)
    b = perplexity(tandem_bin, hf(fixture_dir, "glm-dsa"), text)
    assert abs(q / b - 1) < 0.03, f"glm-dsa-fp8 PPL {q} vs BF16 {b}"
    ref = fixture_dir / "hf-gguf" / "glm-dsa-fp8.gguf"
    if ref.exists():
        r = perplexity(tandem_bin, ref, text)
        assert abs(q / r - 1) < 0.02, f"glm-dsa-fp8 PPL {q} vs the converter's dequantized FP8 {r}"


def test_serves_the_directory_with_its_template_and_generation_config(tandem_bin, fixture_dir, tmp_path):
    ckpt = hf(fixture_dir, "qwen3")
    server = Server(tandem_bin, ckpt, ["--served-model-name", "hf", "--max-model-len", "256"], tmp_path, "hf")
    try:
        log = server.log()
        assert "default sampling parameters overridden by the generation config" in log
        tokenizer_config = json.loads((ckpt / "tokenizer_config.json").read_text())
        assert tokenizer_config.get("chat_template")
        r = server.post("/v1/chat/completions", {"model": "hf", "messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
    finally:
        assert server.stop() == 0


def run_refused(tandem_bin, model, words):
    r = subprocess.run([tandem_bin, "generate", "--model", str(model), "--prompt", "hi", "-n", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    for w in words:
        assert w in r.stderr, r.stderr


def copy_fixture(fixture_dir, name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(hf(fixture_dir, name), dst)
    return dst


def test_token_ids_equal_the_tokenizers_package(tandem_bin, fixture_dir, tmp_path):
    """Each family's tokenizer.json (the fixtures') through Model::Load: the prompt's ids
    equal the Python tokenizers package's (special tokens added as it adds them)."""
    from tokenizers import Tokenizer
    text = "Hello world, 123456 你好世界 🎉 def f(x):\n    return x  \t end <think>"
    for name in ["llama", "qwen3", "gemma3", "glm4moe", "deepseek-v3", "glm-dsa"]:
        out = tmp_path / name
        out.mkdir()
        r = subprocess.run([tandem_bin, "dump-tensors", "--model", str(hf(fixture_dir, name)), "--prompt", text,
                            "--names", "result_output", "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got = [int(x) for x in (out / "tokens.txt").read_text().strip().split(",")]
        tok = Tokenizer.from_file(str(hf(fixture_dir, name) / "tokenizer.json"))
        want = tok.encode(text).ids
        # transformers adds BOS where tokenizer_config.json's add_bos_token says so (Gemma),
        # whatever tokenizer.json's post-processor does; Tandem follows transformers.
        config = json.loads((hf(fixture_dir, name) / "tokenizer_config.json").read_text())
        bos = tok.token_to_id(config["bos_token"]) if isinstance(config.get("bos_token"), str) else None
        if config.get("add_bos_token") and bos is not None and want[:1] != [bos]:
            want = [bos] + want
        assert got == want, name


def test_bad_directories_are_refused_by_name(tandem_bin, fixture_dir, tmp_path):
    d = copy_fixture(fixture_dir, "llama", tmp_path)
    shard = sorted(d.glob("model-*.safetensors"))[-1]
    shard.unlink()
    run_refused(tandem_bin, d, [shard.name])

    d = copy_fixture(fixture_dir, "qwen3", tmp_path)
    config = json.loads((d / "config.json").read_text())
    config["architectures"] = ["MambaForCausalLM"]
    (d / "config.json").write_text(json.dumps(config))
    run_refused(tandem_bin, d, ["MambaForCausalLM"])

    config["architectures"] = ["Qwen3ForCausalLM"]
    heads = config["num_attention_heads"]
    config["num_attention_heads"] = "eight"
    (d / "config.json").write_text(json.dumps(config))
    run_refused(tandem_bin, d, ["num_attention_heads"])

    config["num_attention_heads"] = heads
    config["quantization_config"] = {"quant_method": "awq", "bits": 4}
    (d / "config.json").write_text(json.dumps(config))
    run_refused(tandem_bin, d, ["awq"])

    d = copy_fixture(fixture_dir, "qwen2", tmp_path)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["model"]["type"] = "Unigram"
    (d / "tokenizer.json").write_text(json.dumps(tok))
    run_refused(tandem_bin, d, ["tokenizer.json", "Unigram"])
    (d / "tokenizer.json").unlink()
    run_refused(tandem_bin, d, ["tokenizer.json"])
