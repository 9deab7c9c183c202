"""--kv-cache-dtype through real `tandem serve` processes: an fp8 cache fits more tokens in
the same --kv-cache-memory, serves, and moves over PD (producer and consumer both fp8: the
same text as a colocated fp8 engine); a consumer of another dtype is refused by the
transfer handshake (the KV fingerprint names the dtype: bf16 blocks have fp16's geometry,
so nothing else would stop a bf16 consumer reading fp16 bytes); bad values and an MLA
model exit 2.
The fp8 codec and kernels are tested in src/kernels/kv_dtype_test.cc; perplexity per dtype
in src/engine/golden_test.cc."""
import re
import subprocess

import pytest

from tandem_procs import Server, free_port
from test_pd import decode, kv_config, prefill, prompt_of_tokens

COMMON = ["--served-model-name", "fixture", "--max-model-len", "512", "--kv-cache-memory", "64MiB"]


def tokens_fit(server):
    m = re.search(r"KV cache: (\S+), (\d+) blocks of (\d+) tokens \((\d+) bytes each\), (\d+) tokens fit "
                  r"\((\d+) bytes per token\)", server.log())
    assert m, server.log()[-3000:]
    return m.group(1), int(m.group(5)), int(m.group(6))


@pytest.fixture(scope="module")
def servers(tandem_bin, fixture_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kvdtype")
    model = fixture_dir / "llama.gguf"
    kv_port, kv16_port = free_port(), free_port()
    s = {
        "f16": Server(tandem_bin, model, COMMON + ["--kv-transfer-config", kv_config("kv_producer", kv16_port)], tmp,
                      "f16"),
        "fp8": Server(tandem_bin, model, COMMON + ["--kv-cache-dtype", "fp8"], tmp, "fp8"),
        "p": Server(tandem_bin, model, COMMON + ["--kv-cache-dtype", "fp8",
                                                  "--kv-transfer-config", kv_config("kv_producer", kv_port)], tmp, "p"),
        "d": Server(tandem_bin, model, COMMON + ["--kv-cache-dtype", "fp8_e4m3",
                                                  "--kv-transfer-config", kv_config("kv_consumer", 30100)], tmp, "d"),
        "dbf16": Server(tandem_bin, model, COMMON + ["--kv-cache-dtype", "bf16",
                                                      "--kv-transfer-config", kv_config("kv_consumer", 30100)],
                        tmp, "dbf16"),
    }
    yield s
    for name, server in s.items():
        assert server.stop() == 0, server.log()[-2000:]


def test_fp8_cache_fits_more_tokens(servers, fixture_dir):
    dtype16, n16, b16 = tokens_fit(servers["f16"])
    dtype8, n8, b8 = tokens_fit(servers["fp8"])
    assert (dtype16, dtype8) == ("f16", "fp8_e4m3")
    # Per head: 2 x head_dim bytes in fp16, head_dim + 4 (codes + a float multiplier) in fp8.
    head_dim = int(subprocess.run(["python3", "-c", "import gguf,sys; r=gguf.GGUFReader(sys.argv[1]); "
                                   "f={k: v for k, v in r.fields.items()}; "
                                   "e=int(f['llama.embedding_length'].parts[-1][0]); "
                                   "h=int(f['llama.attention.head_count'].parts[-1][0]); print(e // h)",
                                   str(fixture_dir / "llama.gguf")], capture_output=True, text=True,
                                  check=True).stdout)
    assert b8 * 2 * head_dim == b16 * (head_dim + 4)
    assert n8 > 1.3 * n16


def test_fp8_serves_and_pd_matches_colocated(servers):
    p, d, colo = servers["p"], servers["d"], servers["fp8"]
    prompts = ["hello world", "the quick brown fox jumps over the lazy dog " * 5]
    prompts += [prompt_of_tokens(colo, n) for n in (16, 33)]
    for prompt in prompts:
        body = {"model": "fixture", "prompt": prompt, "max_tokens": 10, "temperature": 0, "ignore_eos": True}
        want = colo.post("/v1/completions", body).json()
        assert want["usage"]["completion_tokens"] == 10
        kv = prefill(p, body)["kv_transfer_params"]
        got = decode(d, body, kv)
        assert got["choices"][0]["text"] == want["choices"][0]["text"], prompt
    assert d.metric("tandem_kv_transfer_pulls_total", result="ok") == len(prompts)


def test_a_consumer_of_another_dtype_is_refused(servers):
    p16, dbf16 = servers["f16"], servers["dbf16"]
    body = {"model": "fixture", "prompt": "hello there", "max_tokens": 4, "temperature": 0, "ignore_eos": True}
    kv = prefill(p16, body)["kv_transfer_params"]
    r = dbf16.post("/v1/completions", dict(body, kv_transfer_params=kv))
    # The pull fails at the handshake (bf16 rows never read fp16 bytes); the consumer
    # then recomputes the prompt (its load failure policy, "recompute" by default).
    assert dbf16.metric("tandem_kv_transfer_pulls_total", result="ok") == 0
    assert "model mismatch" in p16.log(), (p16.log()[-2000:], dbf16.log()[-2000:])
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("cmd", [["serve"], ["generate", "-p", "hi", "-n", "1"], ["bench", "model"],
                                 ["perplexity", "-f", "/dev/null"]])
def test_unknown_dtype_exits_2_naming_the_accepted_values(tandem_bin, fixture_dir, cmd):
    args = [tandem_bin, *cmd, "--model" if cmd[0] != "serve" else str(fixture_dir / "llama.gguf")]
    if cmd[0] != "serve":
        args.append(str(fixture_dir / "llama.gguf"))
    r = subprocess.run([*args, "--kv-cache-dtype", "fp8_inc"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "fp8_inc" in r.stderr and "fp8_e4m3" in r.stderr and "bf16" in r.stderr, r.stderr


def test_mla_model_refuses_a_non_fp16_cache(tandem_bin, fixture_dir):
    model = fixture_dir / "deepseek2-q4_k_m.gguf"
    for cmd in (["serve", str(model), "--port", str(free_port())], ["generate", "--model", str(model), "-p", "hi"]):
        r = subprocess.run([tandem_bin, *cmd, "--kv-cache-dtype", "fp8"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr[-2000:]
        assert "MLA" in r.stderr and "fp16" in r.stderr, r.stderr[-2000:]
