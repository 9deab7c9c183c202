"""`tandem generate` / `tandem perplexity` as a user runs them: real processes, real files."""
import json
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(args, timeout=300, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


def test_generate_default_model_greedy_matches_llama_cpp(tandem_bin, default_model):
    golden = json.loads((ROOT / "tests" / "data" / "golden_default.json").read_text())
    prompt = golden["prompts"][0]
    r = run([tandem_bin, "generate", "--model", default_model, "-p", prompt["text"], "-n", "1",
             "--ignore-eos"])
    assert r.returncode == 0, r.stderr
    # The first greedy token after the prompt is llama.cpp's top-1 at the last position.
    import gguf
    reader = gguf.GGUFReader(default_model)
    field = reader.fields["tokenizer.ggml.tokens"]
    top1 = prompt["top1"][-1]
    piece = bytes(field.parts[field.data[top1]]).decode("utf-8").replace("\u2581", " ")
    assert r.stdout[:-1] == piece


def test_generate_finds_default_model_without_flags(tandem_bin, default_model):
    r = run([tandem_bin, "generate", "-p", "Hello", "-n", "4", "--threads", "1"],
            env={"HOME": "/nonexistent", "TANDEM_MODEL": default_model, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "loaded" in r.stderr


def test_generate_seed_is_reproducible(tandem_bin, fixture_dir):
    model = str(fixture_dir / "llama.gguf")
    args = [tandem_bin, "generate", "--model", model, "-p", "hello world", "-n", "16",
            "--temperature", "0.9", "--seed", "7", "--ignore-eos"]
    a, b = run(args), run(args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    c = run(args[:-2] + ["8", "--ignore-eos"])  # another seed
    assert c.returncode == 0, c.stderr
    assert c.stdout != a.stdout


def test_perplexity_prints_final_estimate(tandem_bin, fixture_dir, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    r = run([tandem_bin, "perplexity", "--model", str(fixture_dir / "llama.gguf"), "-f", str(text),
             "--ctx", "64"])
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("Final estimate: PPL = "), r.stdout
    assert float(last.split("=")[1].split("+/-")[0]) > 1.0


def test_unknown_flag_exits_2_naming_it(tandem_bin):
    r = run([tandem_bin, "generate", "-p", "x", "--no-such-flag"])
    assert r.returncode == 2
    assert "--no-such-flag" in r.stderr


def test_unknown_subcommand_and_bad_values_exit_2(tandem_bin):
    assert run([tandem_bin, "frobnicate"]).returncode == 2
    assert run([tandem_bin, "generate", "-p", "x", "-n", "abc"]).returncode == 2
    assert run([tandem_bin, "generate", "-p", "x", "--cpu-affinity", "zz"]).returncode == 2


def test_missing_and_corrupt_models_are_clear_errors(tandem_bin, tmp_path):
    r = run([tandem_bin, "generate", "--model", str(tmp_path / "nope.gguf"), "-p", "x"])
    assert r.returncode == 2
    assert "not found" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 20)
    r = run([tandem_bin, "generate", "--model", str(bad), "-p", "x"])
    assert r.returncode != 0 and r.returncode < 128, r.returncode  # an error, not a crash
    assert "tandem:" in r.stderr


def test_unsupported_architecture_lists_supported(tandem_bin, fixture_dir, tmp_path):
    import gguf
    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run([tandem_bin, "generate", "--model", str(path), "-p", "x"])
    assert r.returncode != 0
    assert "unsupported architecture 'mamba'" in r.stderr
    assert "gemma3" in r.stderr and "qwen3" in r.stderr


def test_bench_model_json(tandem_bin, fixture_dir):
    r = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
             "--prompt-tokens", "64", "--gen-tokens", "8", "--batch", "2", "4", "--threads", "1"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("prompt_tokens_per_s", "decode_tokens_per_s", "memory_bandwidth_gb_s",
                "roofline_decode_tokens_per_s", "weight_bytes_per_token"):
        assert out[key] > 0, key
    assert set(out["batched_decode_tokens_per_s"]) == {"2", "4"}
    assert all(v > 0 for v in out["batched_decode_tokens_per_s"].values())
    # The roofline is the measured bandwidth over the bytes a token reads.
    assert abs(out["roofline_decode_tokens_per_s"] * out["weight_bytes_per_token"]
               - out["memory_bandwidth_gb_s"] * 1e9) < 0.01 * out["memory_bandwidth_gb_s"] * 1e9
    assert out["threads"] == 1
    # The smallest lengths the flags accept run too (the warm-up request fits). Without
    # --threads the engine runs one compute thread per core available (as `nproc`).
    tiny = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                "--prompt-tokens", "1", "--gen-tokens", "2", "--batch", "1"])
    assert tiny.returncode == 0, tiny.stderr
    assert json.loads(tiny.stdout)["prompt_tokens"] == 1
    assert json.loads(tiny.stdout)["threads"] == len(os.sched_getaffinity(0))
    # The kernels' ISA level: the machine's best with kernels, or what TANDEM_ISA caps it to
    # (a level the CPU lacks: a warning and the best available).
    assert out["isa"] in ("avx512-vnni", "avx2-vnni", "avx2", "scalar")
    assert "kernels: " + out["isa"] in r.stderr
    env = dict(os.environ, TANDEM_ISA="scalar")
    capped = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                  "--prompt-tokens", "8", "--gen-tokens", "2", "--batch", "1", "--threads", "1"], env=env)
    assert capped.returncode == 0, capped.stderr
    assert json.loads(capped.stdout)["isa"] == "scalar"
    env["TANDEM_ISA"] = "avx2"
    avx2 = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                "--prompt-tokens", "8", "--gen-tokens", "2", "--batch", "1", "--threads", "1"], env=env)
    assert avx2.returncode == 0, avx2.stderr
    assert json.loads(avx2.stdout)["isa"] in ("avx2-vnni", "avx2", "scalar")
    env["TANDEM_ISA"] = "amx"
    over = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                "--prompt-tokens", "8", "--gen-tokens", "2", "--batch", "1", "--threads", "1"], env=env)
    assert over.returncode == 0, over.stderr
    assert "TANDEM_ISA=amx" in over.stderr and json.loads(over.stdout)["isa"] == out["isa"]
    bad = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--batch", "0"])
    assert bad.returncode == 2 and "--batch" in bad.stderr
    # The batched streams' prompt and length (llama-batched-bench's -npp / -ntg).
    npp = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
               "--prompt-tokens", "8", "--gen-tokens", "2", "--batch", "3", "--batch-prompt-tokens", "40",
               "--batch-gen-tokens", "6", "--threads", "1"])
    assert npp.returncode == 0, npp.stderr
    assert json.loads(npp.stdout)["batched_decode_tokens_per_s"]["3"] > 0
    for flag, value in (("--batch-prompt-tokens", "0"), ("--batch-gen-tokens", "1")):
        bad = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), flag, value])
        assert bad.returncode == 2 and flag in bad.stderr, bad.stderr
    # A prompt prefilled in chunks (the warm-up's 32 tokens too).
    chunked = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                   "--prompt-tokens", "40", "--gen-tokens", "2", "--batch", "1", "--threads", "1",
                   "--max-num-batched-tokens", "16"])
    assert chunked.returncode == 0, chunked.stderr
    assert json.loads(chunked.stdout)["prompt_tokens_per_s"] > 0
    bad = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--max-num-batched-tokens", "0"])
    assert bad.returncode == 2 and "--max-num-batched-tokens" in bad.stderr


def test_quantization_bogus_exits_2_naming_accepted_values(tandem_bin, fixture_dir, tmp_path):
    model = str(fixture_dir / "llama.gguf")
    text = tmp_path / "t.txt"
    text.write_text("hello world " * 20)
    for args in (["generate", "--model", model, "-p", "x"], ["perplexity", "--model", model, "-f", str(text)],
                 ["bench", "model", "--model", model], ["serve", model]):
        r = run([tandem_bin, *args, "--quantization", "bogus"], timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert "--quantization" in r.stderr and "'bogus'" in r.stderr, r.stderr
        assert "accepted: w8a8, ascend" in r.stderr, r.stderr


def test_quantization_w8a8_generates_on_requantized_weights(tandem_bin, fixture_dir):
    # llama.gguf mixes F16, BF16 and F32 matrices (token_embd is F16) with quantized ones.
    args = [tandem_bin, "generate", "--model", str(fixture_dir / "llama.gguf"), "-p", "hello world", "-n", "8",
            "--ignore-eos", "--threads", "1"]
    w8a8 = run(args + ["--quantization", "w8a8"])
    assert w8a8.returncode == 0, w8a8.stderr
    assert "--quantization w8a8: re-quantized" in w8a8.stderr and "to Q8_0" in w8a8.stderr
    assert w8a8.stdout.strip()
    # "ascend" (what vllm-ascend deployments pass) computes on the weights as stored, exactly as no flag.
    plain, ascend = run(args), run(args + ["--quantization", "ascend"])
    assert plain.returncode == 0 and ascend.returncode == 0, ascend.stderr
    assert "--quantization ascend: weights used as stored" in ascend.stderr
    assert "re-quantized" not in plain.stderr
    assert ascend.stdout == plain.stdout
    bench = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--json", "--repeat", "1",
                 "--prompt-tokens", "32", "--gen-tokens", "4", "--batch", "2", "--threads", "1",
                 "--quantization", "w8a8"])
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["quantization"] == "w8a8"


def test_quantization_w8a8_matches_a_file_quantized_by_gguf_py(tandem_bin, fixture_dir, tmp_path):
    """w8a8 at load = the same model with its float matrices stored as Q8_0 by gguf-py."""
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    src = fixture_dir / "llama.gguf"
    reader = gguf.GGUFReader(str(src))
    dst = tmp_path / "llama-q8_0.gguf"
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
    converted = 0
    for t in reader.tensors:
        if len(t.shape) == 2 and t.tensor_type in (QT.F32, QT.F16, QT.BF16):
            values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            writer.add_tensor(t.name, gguf.quants.quantize(values, QT.Q8_0), raw_dtype=QT.Q8_0)
            converted += 1
        else:
            raw_dtype = None if t.tensor_type in (QT.F32, QT.F16) else t.tensor_type
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert converted > 0

    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    common = ["perplexity", "-f", str(text), "--ctx", "64", "--threads", "1"]
    ours = run([tandem_bin, *common, "--model", str(src), "--quantization", "w8a8"])
    theirs = run([tandem_bin, *common, "--model", str(dst)])
    plain = run([tandem_bin, *common, "--model", str(src)])
    assert ours.returncode == 0 and theirs.returncode == 0 and plain.returncode == 0, ours.stderr + theirs.stderr
    assert f"re-quantized {converted} F16/BF16/F32 matrices" in ours.stderr
    final = [r.stdout.strip().splitlines()[-1] for r in (ours, theirs, plain)]
    assert final[0].startswith("Final estimate: PPL = ")
    # Byte-identical weights give identical results; the stored floats give others.
    assert final[0] == final[1]
    assert final[0] != final[2]


def test_dump_tensors_and_compare_tensors(tandem_bin, fixture_dir, tmp_path):
    """`tandem dump-tensors` writes llama.cpp-named .npy files; tools/compare_tensors.py
    finds the first tensor that differs from a llama.cpp-style .npz (here built from the
    dump itself, then with one value of layer 1 changed)."""
    import numpy as np

    model = str(fixture_dir / "qwen3moe-q8_0.gguf")
    out = tmp_path / "td"
    r = run([tandem_bin, "dump-tensors", "-m", model, "--tokens", "1,5,9", "--names", "l_out,result", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert (out / "tokens.txt").read_text() == "1,5,9\n"
    names = sorted(p.stem for p in out.glob("*.npy"))
    assert "l_out-0" in names and "result_output" in names and "result_norm" in names
    assert not any(n.startswith("attn_norm") for n in names)
    l0 = np.load(out / "l_out-0.npy")
    logits = np.load(out / "result_output.npy")
    assert l0.shape[0] == 3 and logits.shape[0] == 3 and np.isfinite(logits).all()

    # The same tensors as llama.cpp's tool would store them, layer by layer.
    order = sorted((n for n in names if n.startswith("l_out")), key=lambda n: int(n.split("-")[1]))
    order += ["result_norm", "result_output"]
    tensors = {n: np.load(out / f"{n}.npy") for n in order}
    np.savez(tmp_path / "same.npz", tokens=np.array([1, 5, 9], dtype=np.int32), **tensors)
    tool = [os.environ.get("PYTHON", "python3"), str(ROOT / "tools" / "compare_tensors.py")]
    r = run(tool + ["--llama", str(tmp_path / "same.npz"), "--tandem", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"all {len(order)} tensors equal bit for bit" in r.stdout

    tensors["l_out-1"] = tensors["l_out-1"].copy()
    tensors["l_out-1"][2, 7] = np.nextafter(tensors["l_out-1"][2, 7], np.float32(np.inf))
    np.savez(tmp_path / "diff.npz", **tensors)
    r = run(tool + ["--llama", str(tmp_path / "diff.npz"), "--tandem", str(out)])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first tensor not equal bit for bit: l_out-1 (row 2)" in r.stdout

    # Bad input: exit 2 with the problem named.
    r = run([tandem_bin, "dump-tensors", "-m", model, "--tokens", "1,x", "-o", str(out)])
    assert r.returncode == 2 and "'x' is not a token id" in r.stderr
    r = run([tandem_bin, "dump-tensors", "-m", model, "-o", str(out)])
    assert r.returncode == 2 and "--tokens or --prompt" in r.stderr
    r = run([tandem_bin, "dump-tensors", "-m", model, "--tokens", "1,99999999", "-o", str(out)])
    assert r.returncode == 2 and "outside the vocabulary" in r.stderr
    r = run([tandem_bin, "dump-tensors", "-m", model, "--tokens", "1", "--names", "nope", "-o", str(out)])
    assert r.returncode == 2 and "prefixes" in r.stderr
    r = run(tool + ["--llama", str(tmp_path / "missing.npz"), "--tandem", str(out)])
    assert r.returncode == 2


def test_serve_without_chunked_prefill_needs_a_budget_for_the_longest_prompt(tandem_bin, fixture_dir):
    # vLLM's rule: without chunking a prompt runs in one step, so --max-num-batched-tokens
    # must hold --max-model-len (the fixture's context, 256); and the scheduler limits are
    # checked once, with the flag named.
    model = str(fixture_dir / "llama.gguf")
    r = run([tandem_bin, "serve", model, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "64"], timeout=60)
    assert r.returncode == 2, r.stderr
    assert "--max-num-batched-tokens (64) is smaller than --max-model-len (256)" in r.stderr
    r = run([tandem_bin, "serve", model, "--block-size", "0"], timeout=60)
    assert r.returncode == 2 and "--block-size must be in [1, 1024], got 0" in r.stderr, r.stderr
