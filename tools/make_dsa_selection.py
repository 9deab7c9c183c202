#!/usr/bin/env python3
"""llama.cpp's DeepSeek-sparse-attention choices on a fixture, for Tandem's tests.

Runs the golden file's long prompt (its last entry: the first 256 tokens of
tests/data/perplexity.txt) through llama.cpp (llama-cpp-python's low-level API) in one
batch and reads the lightning indexer's `top_k-<layer>` tensors through the scheduler's
eval callback: for each query position past the indexer's top_k, the sorted positions
llama.cpp's attention keeps. Earlier positions keep their whole past (llama.cpp picks
masked slots there too), so they are left out.

Usage: tools/make_dsa_selection.py --model build/fixtures/deepseek32-q4_k_m.gguf \\
           --name fixture_deepseek32-q4_k_m [--layers 0,1,2]
Reads tests/data/golden_<name>.json, writes tests/data/dsa_selection_<name>.json.
Layer 0 only by default: later layers take inputs that have passed through MoE routing,
where one rounding flip changes an expert choice and so the selections (the golden
tests' note on chaotic sparse fixtures). llama-cpp-python is a tool here, never a
runtime or CI dependency.
"""
import argparse
import ctypes
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--layers", default="0", help="comma-separated trunk layers")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    layers = [int(x) for x in args.layers.split(",")]

    import llama_cpp
    from llama_cpp import llama_cpp as C  # imported here: only this tool needs it

    golden_path = os.path.join(ROOT, "tests", "data", f"golden_{args.name}.json")
    with open(golden_path, encoding="utf-8") as f:
        tokens = json.load(f)["prompts"][-1]["tokens"]

    base = ctypes.CDLL(os.path.join(os.path.dirname(C.__file__), "lib", "libggml-base.so"))
    base.ggml_get_name.restype = ctypes.c_char_p
    base.ggml_get_name.argtypes = [ctypes.c_void_p]
    base.ggml_nbytes.restype = ctypes.c_size_t
    base.ggml_nbytes.argtypes = [ctypes.c_void_p]
    base.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    wanted = {f"top_k-{il}": il for il in layers}
    got = {}

    @C.ggml_backend_sched_eval_callback
    def cb(t, ask, _):
        name = base.ggml_get_name(t).decode()
        if name not in wanted:
            return not ask
        if ask:
            return True
        # struct ggml_tensor: enum type (4 bytes, padded to 8), buffer pointer, int64 ne[4].
        ne = (ctypes.c_int64 * 4).from_address(t + 16)
        n = base.ggml_nbytes(t)
        buf = (ctypes.c_int32 * (n // 4))()
        base.ggml_backend_tensor_get(t, buf, 0, n)
        rows = np.frombuffer(buf, dtype=np.int32).reshape(ne[1], ne[0])
        got[wanted[name]] = [sorted(int(x) for x in row) for row in rows]
        return True

    C.llama_backend_init()
    mp = C.llama_model_default_params()
    model = C.llama_model_load_from_file(args.model.encode(), mp)
    cp = C.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = args.threads
    # As the goldens' llama_cpp.Llama (flash_attn=False); the default (auto) would take
    # ggml's flash-attention kernel, whose other roundings reach the later layers' choices.
    cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.cb_eval = cb
    ctx = C.llama_init_from_model(model, cp)
    arr = (C.llama_token * len(tokens))(*tokens)
    if C.llama_decode(ctx, C.llama_batch_get_one(arr, len(tokens))) != 0:
        raise RuntimeError("llama_decode failed")
    top_k = len(next(iter(got.values()))[0]) if got else 0
    if sorted(got) != layers:
        raise RuntimeError(f"top_k tensors seen for layers {sorted(got)}, wanted {layers}")
    out = {"model": os.path.basename(args.model), "name": args.name,
           "generator": "llama-cpp-python " + llama_cpp.__version__, "tokens": tokens, "top_k": top_k,
           "layers": [{"layer": il, "first_pos": top_k, "kept": got[il][top_k:]} for il in layers]}
    path = os.path.join(ROOT, "tests", "data", f"dsa_selection_{args.name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    C.llama_free(ctx)
    C.llama_model_free(model)
    print(f"wrote {path}: {len(tokens)} tokens, top_k {top_k}, layers {layers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
