"""`tandem generate` / `tandem perplexity` as a user runs them: real processes, real files."""
import json
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
    bad = run([tandem_bin, "bench", "model", "--model", str(fixture_dir / "llama.gguf"), "--batch", "0"])
    assert bad.returncode == 2 and "--batch" in bad.stderr
