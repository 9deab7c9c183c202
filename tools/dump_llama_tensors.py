#!/usr/bin/env python3
"""Dumps llama.cpp's intermediate tensors for one prompt, to find where Tandem's forward
pass first parts from llama.cpp's (issue: sparse models, fidelity).

Runs the prompt through llama.cpp (llama-cpp-python's low-level API) in one batch with
logits for every position (as tools/make_golden.py's batched path: flash attention off)
and records, through the scheduler's eval callback, every tensor whose name starts with
one of --names (llama.cpp's graph names: attn_norm-0, kv_cmpr_pe-0, kqv_out-0, ffn_inp-0,
ffn_moe_topk-1, ffn_out-1, l_out-2, result_norm, result_output, ...; --list prints the
names the graph has). Writes an .npz: one array per tensor, shape ne[1] x ne[0] (a row per
token; the first ne[0] x ne[1] values of higher-dimensional tensors), plus `tokens`.
Views (for example ffn_moe_topk, a view of the expert argsort) keep their parent's row
stride: `<name>__stride` gives it in elements.

    tools/dump_llama_tensors.py --model build/fixtures/deepseek32-q8_0.gguf \\
        --golden tests/data/golden_fixture_deepseek32-q8_0.json --prompt 0 \\
        --names l_out,ffn_inp,kv_cmpr_pe-0,result_output --out /tmp/llama.npz

--token-by-token: the prompt one token per llama_decode (n_ubatch 1: llama.cpp's decode
path, the goldens' `top1_token_by_token`), each tensor's rows concatenated over the steps
(a tensor whose width changes from step to step, such as kq, is kept per step: kq-0@5).

--agreement: instead, every prompt of --golden through this llama.cpp, and its top-1
agreement with the golden file (all positions, and where the golden's batched and
token-by-token answers agree): which build made a golden file, and how far llama.cpp's
own builds for other ISAs stand from it.

    LLAMA_CPP_LIB_PATH=$(LLAMA_ISA=avx2 bench/build_llama_cpp.sh) tools/dump_llama_tensors.py \
        --model build/fixtures/deepseek32-q8_0.gguf \
        --golden tests/data/golden_fixture_deepseek32-q8_0.json --agreement

Another llama.cpp build than the installed llama-cpp-python's: LLAMA_CPP_LIB_PATH=<dir
with libllama.so and libggml-base.so> (llama-cpp-python's own switch), for example
bench/build_llama_cpp.sh's output directory; llama.cpp's bits depend on the ISA it was
built for (its BF16 dot products use vdpbf16ps where the build has AVX512-BF16).
llama-cpp-python is a tool here, never a runtime or CI dependency.
"""
import argparse
import ctypes
import json
import os
import sys

import numpy as np

GGML_TYPE_F32 = 0
GGML_TYPE_I32 = 26


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--golden", help="tests/data/golden_*.json: take the tokens of --prompt")
    ap.add_argument("--prompt", type=int, default=0)
    ap.add_argument("--tokens", help="comma-separated token ids instead of --golden")
    ap.add_argument("--names", default="l_out,result_output", help="comma-separated name prefixes")
    ap.add_argument("--list", action="store_true", help="print every tensor name the graph evaluates")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="llama_tensors.npz")
    ap.add_argument("--agreement", action="store_true", help="top-1 agreement with --golden over all its prompts")
    ap.add_argument("--token-by-token", action="store_true", help="one token per llama_decode (its decode path)")
    args = ap.parse_args()
    if args.agreement:
        return agreement(args)
    if args.tokens:
        tokens = [int(t) for t in args.tokens.split(",")]
    elif args.golden:
        with open(args.golden, encoding="utf-8") as f:
            tokens = json.load(f)["prompts"][args.prompt]["tokens"]
    else:
        sys.exit("dump_llama_tensors.py: give --golden (with --prompt) or --tokens")
    got, names = run(args.model, tokens, [p for p in args.names.split(",") if p], args.threads,
                     token_by_token=args.token_by_token)
    np.savez(args.out, tokens=np.array(tokens, dtype=np.int32), **got)
    if args.list:
        seen = []
        for n in names:
            if n not in seen:
                seen.append(n)
        print("\n".join(seen))
    print(f"wrote {args.out}: {len(tokens)} tokens, {sum(1 for k in got if not k.endswith('__stride'))} tensors")
    return 0


def agreement(args):
    if not args.golden:
        sys.exit("dump_llama_tensors.py: --agreement needs --golden")
    with open(args.golden, encoding="utf-8") as f:
        golden = json.load(f)
    agree = total = stable = stable_agree = 0
    for p in golden["prompts"]:
        logits = run(args.model, p["tokens"], ["result_output"], args.threads)[0]["result_output"]
        for pos, want in enumerate(p["top1"]):
            top1 = int(np.argmax(logits[pos]))
            total += 1
            agree += top1 == want
            if p["top1_token_by_token"][pos] == want:
                stable += 1
                stable_agree += top1 == want
    print(f"{os.path.basename(args.golden)}: top-1 agreement {agree}/{total} ({100 * agree / total:.2f}%), "
          f"where the golden agrees with itself {stable_agree}/{stable} ({100 * stable_agree / stable:.2f}%)")
    return 0


def run(model_path, tokens, prefixes, threads, all_logits=True, token_by_token=False):
    """Evaluates `tokens` in one batch; returns ({name: rows, name__stride: n}, every name seen).
    `all_logits`: every position's output (the last layer runs on every token), else the
    last one's only (llama_batch_get_one). `token_by_token`: one llama_decode per token,
    each tensor's rows concatenated over the steps."""
    from llama_cpp import llama_cpp as C  # imported here: only this tool needs it

    lib_dir = os.environ.get("LLAMA_CPP_LIB_PATH") or os.path.join(os.path.dirname(C.__file__), "lib")
    base = ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"))
    base.ggml_get_name.restype = ctypes.c_char_p
    base.ggml_get_name.argtypes = [ctypes.c_void_p]
    base.ggml_nbytes.restype = ctypes.c_size_t
    base.ggml_nbytes.argtypes = [ctypes.c_void_p]
    base.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    got = {}
    names = []

    @C.ggml_backend_sched_eval_callback
    def cb(t, ask, _):
        if ask:
            return True  # see every tensor
        name = base.ggml_get_name(t).decode()
        names.append(name)
        if not any(name.startswith(p) for p in prefixes):
            return True
        # struct ggml_tensor: enum type (4 bytes, padded to 8), buffer pointer, int64 ne[4], size_t nb[4].
        ttype = ctypes.c_int32.from_address(t).value
        ne = list((ctypes.c_int64 * 4).from_address(t + 16))
        nb = list((ctypes.c_size_t * 4).from_address(t + 48))
        if ttype not in (GGML_TYPE_F32, GGML_TYPE_I32):
            return True
        n = base.ggml_nbytes(t)
        buf = (ctypes.c_uint8 * n)()
        base.ggml_backend_tensor_get(t, buf, 0, n)
        flat = np.frombuffer(bytes(buf), dtype=np.float32 if ttype == GGML_TYPE_F32 else np.int32)
        stride = nb[1] // 4 if ne[1] > 1 else ne[0]
        rows = np.stack([flat[r * stride:r * stride + ne[0]] for r in range(ne[1])])
        if token_by_token:
            steps.setdefault(name, []).append(rows)
        else:
            got[name] = rows
        got[name + "__stride"] = np.array(stride)
        return True

    steps = {}

    C.llama_backend_init()
    mp = C.llama_model_default_params()
    if os.environ.get("LLAMA_NO_REPACK") == "1":  # llama.cpp's weights as stored (no CPU repacking)
        mp.use_extra_bufts = False
    model = C.llama_model_load_from_file(model_path.encode(), mp)
    if not model:
        sys.exit(f"dump_llama_tensors.py: llama.cpp could not load {model_path}")
    cp = C.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = max(512, len(tokens))
    if token_by_token:
        cp.n_batch = cp.n_ubatch = 1
    cp.n_threads = cp.n_threads_batch = threads
    # As the goldens' llama_cpp.Llama (flash_attn=False).
    cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.cb_eval = cb
    ctx = C.llama_init_from_model(model, cp)
    if token_by_token:
        batch = C.llama_batch_init(1, 0, 1)
        failed = False
        for i, tok in enumerate(tokens):
            batch.n_tokens = 1
            batch.token[0] = tok
            batch.pos[0] = i
            batch.n_seq_id[0] = 1
            batch.seq_id[0][0] = 0
            batch.logits[0] = 1
            failed = failed or C.llama_decode(ctx, batch) != 0
        C.llama_batch_free(batch)
        for name, parts in steps.items():
            if len({p.shape[1:] for p in parts}) == 1:
                got[name] = np.concatenate(parts)
            else:  # one entry per step: name@0, name@1, ...
                got.pop(name + "__stride", None)
                for i, part in enumerate(parts):
                    got[f"{name}@{i}"] = part
    elif all_logits:
        batch = C.llama_batch_init(len(tokens), 0, 1)
        batch.n_tokens = len(tokens)
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        failed = C.llama_decode(ctx, batch) != 0
        C.llama_batch_free(batch)
    else:
        arr = (C.llama_token * len(tokens))(*tokens)
        failed = C.llama_decode(ctx, C.llama_batch_get_one(arr, len(tokens))) != 0
    if failed:
        sys.exit("llama_decode failed")
    C.llama_free(ctx)
    C.llama_model_free(model)
    return got, names


if __name__ == "__main__":
    sys.exit(main())
