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
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_llama_tensors import run  # noqa: E402  (a tool beside this one)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--layers", default="0", help="comma-separated trunk layers")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    layers = [int(x) for x in args.layers.split(",")]

    import llama_cpp  # its version for the record; imported here: only this tool needs it

    golden_path = os.path.join(ROOT, "tests", "data", f"golden_{args.name}.json")
    with open(golden_path, encoding="utf-8") as f:
        tokens = json.load(f)["prompts"][-1]["tokens"]

    # llama.cpp's tensors through its eval callback (tools/dump_llama_tensors.py), the
    # last position's logits only, as a plain llama_decode of the prompt.
    tensors, _ = run(args.model, tokens, [f"top_k-{il}" for il in layers], args.threads, all_logits=False)
    got = {il: [sorted(int(x) for x in row) for row in tensors[f"top_k-{il}"]]
           for il in layers if f"top_k-{il}" in tensors}
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
    print(f"wrote {path}: {len(tokens)} tokens, top_k {top_k}, layers {layers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
