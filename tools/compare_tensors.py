#!/usr/bin/env python3
"""Compares Tandem's intermediate tensors with llama.cpp's, in llama.cpp's graph order.

    tandem dump-tensors -m MODEL.gguf --tokens 1,2,3 -o /tmp/td
    tools/dump_llama_tensors.py --model MODEL.gguf --tokens 1,2,3 \
        --names attn_norm,attn_out,ffn_inp,ffn_norm,ffn_out,l_out,result_norm,result_output --out /tmp/ll.npz
    tools/compare_tensors.py --llama /tmp/ll.npz --tandem /tmp/td

For every tensor both sides have (same name, same shape): the largest |difference|, how
many rows (tokens) are equal bit for bit, and the first row that is not; then the first
tensor, in llama.cpp's order, that is not equal bit for bit. Exit 0 when they all are,
1 when one is not, 2 on bad input (a missing file, no tensor in common, shapes that
differ).
"""
import argparse
import os
import sys

import numpy as np


def compare(llama, tandem_dir, tolerance_rows=None):
    """Yields (name, max_abs_diff, equal_rows, rows, first_differing_row) in llama's order."""
    for name in llama.files:
        if name == "tokens" or name.endswith("__stride"):
            continue
        path = os.path.join(tandem_dir, name + ".npy")
        if not os.path.exists(path):
            continue
        want = llama[name].astype(np.float32)
        got = np.load(path)
        if want.shape != got.shape:
            raise ValueError(f"{name}: llama.cpp {want.shape}, tandem {got.shape}")
        same = [bool(np.array_equal(got[r].view(np.uint32), want[r].view(np.uint32))) for r in range(want.shape[0])]
        first = next((r for r, s in enumerate(same) if not s), None)
        yield name, float(np.max(np.abs(got - want))) if want.size else 0.0, sum(same), len(same), first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama", required=True, help="tools/dump_llama_tensors.py's .npz")
    ap.add_argument("--tandem", required=True, help="`tandem dump-tensors` output directory")
    args = ap.parse_args()
    if not os.path.isfile(args.llama):
        print(f"compare_tensors.py: {args.llama} is not a file", file=sys.stderr)
        return 2
    if not os.path.isdir(args.tandem):
        print(f"compare_tensors.py: {args.tandem} is not a directory", file=sys.stderr)
        return 2
    llama = np.load(args.llama)
    first_diff = None
    n = 0
    try:
        for name, diff, equal, rows, first in compare(llama, args.tandem):
            n += 1
            where = "" if first is None else f", first differing row {first}"
            print(f"{name:24s} max |diff| {diff:.3e}, rows equal {equal}/{rows}{where}")
            if first is not None and first_diff is None:
                first_diff = (name, first)
    except ValueError as e:
        print(f"compare_tensors.py: {e}", file=sys.stderr)
        return 2
    if n == 0:
        print("compare_tensors.py: no tensor name in common", file=sys.stderr)
        return 2
    if first_diff is None:
        print(f"all {n} tensors equal bit for bit")
        return 0
    print(f"first tensor not equal bit for bit: {first_diff[0]} (row {first_diff[1]})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
