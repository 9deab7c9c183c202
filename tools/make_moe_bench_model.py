#!/usr/bin/env python3
"""Writes a realistic-size synthetic sparse model for speed measurements (never committed).

Qwen3-30B-A3B-shaped layers (qwen3moe: hidden 2048, 32 query / 4 KV heads of 128, 128
experts, top-8, expert FFN 768, QK-norm), with fewer layers so the file is a few GB, a
small vocabulary (the fixtures' byte-level BPE, so the LM head is negligible and the
layers dominate), random weights. The BF16 source is streamed to disk tensor by tensor,
then quantized by llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize)
to Q4_K_M, as a user would make the file.

Usage: tools/make_moe_bench_model.py OUT.gguf [--layers 10] [--ftype Q4_K_M] [--keep-source]
           [--llama-quantize BIN]
Needs numpy, gguf and llama_cpp (pip install llama-cpp-python; a tool, not a dependency),
or with --llama-quantize the native `llama-quantize` that bench/build_llama_cpp.sh builds
(the same llama.cpp source) instead of llama_cpp.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

import make_fixtures  # noqa: E402  (the fixtures' vocabulary)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
EXPERTS, USED, EXPERT_FF = 128, 8, 768


def tensors(n_layers, n_vocab):
    """(name, shape as rows..., kind) in file order; kind 'norm' tensors are F32 ones."""
    out = [("token_embd.weight", (n_vocab, HIDDEN), "w"), ("output_norm.weight", (HIDDEN,), "norm"),
           ("output.weight", (n_vocab, HIDDEN), "w")]
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for i in range(n_layers):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (HIDDEN,), "norm"),
                (p + "attn_q.weight", (q, HIDDEN), "w"), (p + "attn_k.weight", (kv, HIDDEN), "w"),
                (p + "attn_v.weight", (kv, HIDDEN), "w"), (p + "attn_output.weight", (HIDDEN, q), "w"),
                (p + "attn_q_norm.weight", (HEAD_DIM,), "norm"), (p + "attn_k_norm.weight", (HEAD_DIM,), "norm"),
                (p + "ffn_norm.weight", (HIDDEN,), "norm"),
                (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), "router"),
                (p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FF, HIDDEN), "w"),
                (p + "ffn_up_exps.weight", (EXPERTS, EXPERT_FF, HIDDEN), "w"),
                (p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FF), "w")]
    return out


def bf16(x):
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def data_for(rng, shape, kind):
    if kind == "norm":
        return (1.0 + 0.1 * rng.standard_normal(shape[0], dtype=np.float32)).astype(np.float32)
    cols = shape[-1]
    std = (1.0 if kind == "router" else 1.0) / np.sqrt(cols)
    if kind == "router":
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)
    out = np.empty(shape, dtype=np.uint16)
    flat = out.reshape(-1, cols)
    for r in range(0, flat.shape[0], 8192):  # in slices: a 3-D expert tensor is 400 MB of floats
        chunk = rng.standard_normal((min(8192, flat.shape[0] - r), cols), dtype=np.float32) * np.float32(std)
        flat[r:r + chunk.shape[0]] = bf16(chunk)
    return out


def write_source(path, n_layers):
    rng = np.random.default_rng(42)
    vocab = make_fixtures.qwen_vocab(thinking=True)
    w = gguf.GGUFWriter(path, "qwen3moe")
    a = "qwen3moe"
    w.add_name("tandem-bench-qwen3moe-30b-a3b-shaped")
    w.add_uint32(f"{a}.context_length", 4096)
    w.add_uint32(f"{a}.embedding_length", HIDDEN)
    w.add_uint32(f"{a}.block_count", n_layers)
    w.add_uint32(f"{a}.feed_forward_length", 6144)
    w.add_uint32(f"{a}.attention.head_count", HEADS)
    w.add_uint32(f"{a}.attention.head_count_kv", KV_HEADS)
    w.add_uint32(f"{a}.attention.key_length", HEAD_DIM)
    w.add_uint32(f"{a}.attention.value_length", HEAD_DIM)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32(f"{a}.rope.freq_base", 1000000.0)
    w.add_uint32(f"{a}.expert_count", EXPERTS)
    w.add_uint32(f"{a}.expert_used_count", USED)
    w.add_uint32(f"{a}.expert_feed_forward_length", EXPERT_FF)
    make_fixtures.write_vocab(w, vocab)
    specs = tensors(n_layers, len(vocab.tokens))
    for name, shape, kind in specs:
        f32 = kind in ("norm", "router")
        nbytes = int(np.prod(shape)) * (4 if f32 else 2)
        w.add_tensor_info(name, shape if f32 else shape, np.float32 if f32 else np.uint16, nbytes,
                          raw_dtype=None if f32 else QT.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, kind in specs:
        w.write_tensor_data(data_for(rng, shape, kind))
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--ftype", default="Q4_K_M", help="llama.cpp file type name (LLAMA_FTYPE_MOSTLY_<ftype>)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--keep-source", action="store_true")
    ap.add_argument("--llama-quantize", help="quantize with this llama-quantize binary instead of llama_cpp")
    args = ap.parse_args()
    if not args.llama_quantize:
        import llama_cpp

    source = args.out + ".bf16.gguf"
    t0 = time.time()
    write_source(source, args.layers)
    print(f"wrote {source}: {os.path.getsize(source) / 1e9:.2f} GB in {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    if args.llama_quantize:
        import subprocess
        rc = subprocess.run([args.llama_quantize, source, args.out, args.ftype, str(args.threads)]).returncode
    else:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + args.ftype)
        params.nthread = args.threads
        rc = llama_cpp.llama_model_quantize(source.encode(), args.out.encode(), params)
    if rc != 0:
        sys.exit(f"quantizing failed ({rc})")
    print(f"quantized to {args.ftype}: {args.out}, {os.path.getsize(args.out) / 1e9:.2f} GB in "
          f"{time.time() - t0:.0f} s", flush=True)
    if not args.keep_source:
        os.remove(source)


if __name__ == "__main__":
    main()
