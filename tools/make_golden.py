#!/usr/bin/env python3
"""Golden forward-pass data from llama.cpp (llama-cpp-python) for Tandem's tests.

For each model and prompt: the prompt's token ids (llama.cpp's tokenizer, BOS added),
and at every position llama.cpp's top-1 next token and its top-K logits. Also the
perplexity of tests/data/perplexity.txt computed from llama.cpp's logits exactly as
llama-perplexity does (windows of n_ctx tokens, BOS first, second half scored).

Usage: tools/make_golden.py --model models/default.gguf --name default --ppl-chunks 7
       tools/make_golden.py --model build/fixtures/llama.gguf --name fixture_llama
Writes tests/data/golden_<name>.json. llama-cpp-python is a tool here, never a
runtime or CI dependency.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Translate to German: The weather is nice today. ->",
    "<start_of_turn>user\nWhat is the boiling point of water in Celsius?<end_of_turn>\n<start_of_turn>model\n",
    "1, 2, 3, 5, 8, 13, 21,",
    "Large language models are trained on vast amounts of text, and at inference time they",
    "北京是中国的首都，也是",
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def perplexity(llm, tokens, ctx, n_chunks):
    """llama-perplexity's figure: windows of ctx tokens, BOS first (when the vocab adds
    one, as llama-perplexity does), second half scored."""
    first = ctx // 2
    nll, count = 0.0, 0
    add_bos = llm._model.add_bos_token()
    for c in range(n_chunks):
        window = list(tokens[c * ctx:(c + 1) * ctx])
        if add_bos:
            window[0] = llm.token_bos()
        llm.reset()
        llm.eval(window)
        logits = np.array(llm.scores[:ctx], dtype=np.float64)
        for j in range(first, ctx - 1):
            row = logits[j]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll += lse - row[tokens[c * ctx + j + 1]]
            count += 1
    return math.exp(nll / count), count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--ppl-ctx", type=int, default=512)
    ap.add_argument("--ppl-chunks", type=int, default=0, help="0 = skip perplexity")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--long-tokens", type=int, default=256,
                    help="also teacher-force this many tokens of tests/data/perplexity.txt")
    ap.add_argument("--out", default="", help="output path (default tests/data/golden_<name>.json)")
    ap.add_argument("--token-by-token-logits", action="store_true",
                    help="also record the token-by-token path's top-k logits per position")
    ap.add_argument("--ppl-only", action="store_true",
                    help="recompute only the perplexity entry of an existing golden file")
    args = ap.parse_args()

    from llama_cpp import Llama  # imported here: only this tool needs it

    n_ctx = max(512, args.ppl_ctx)
    llm = Llama(model_path=args.model, n_ctx=n_ctx, n_batch=n_ctx, logits_all=True,
                n_threads=args.threads, verbose=False, seed=0)
    # llama.cpp evaluated token by token (its decode path) differs numerically from its
    # batched prompt path; their top-1 agreement is the noise floor any other
    # implementation can be held to, and is recorded beside the data.
    llm_single = Llama(model_path=args.model, n_ctx=n_ctx, n_batch=1, n_ubatch=1,
                       logits_all=True, n_threads=args.threads, verbose=False, seed=0)
    llm_prompts = llm
    n_vocab = llm.n_vocab()
    out = {"model": os.path.basename(args.model), "name": args.name, 
           "generator": "llama-cpp-python " + __import__("llama_cpp").__version__,
           "top_k": args.top_k, "prompts": []}
    with open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), encoding="utf-8") as f:
        long_text = f.read()
    path = args.out or os.path.join(ROOT, "tests", "data", f"golden_{args.name}.json")
    if args.ppl_only:
        with open(path, encoding="utf-8") as f:
            out = json.load(f)
    inputs = [] if args.ppl_only else [
        (p, llm.tokenize(p.encode("utf-8"), add_bos=True, special=True)) for p in PROMPTS]
    if args.long_tokens > 0 and not args.ppl_only:
        long_tokens = llm.tokenize(long_text.encode("utf-8"), add_bos=True, special=False)
        inputs.append(("<first %d tokens of perplexity.txt>" % args.long_tokens,
                       long_tokens[: args.long_tokens]))
    self_agree, positions = 0, 0
    for prompt, tokens in inputs:
        tokens = [t for t in tokens if t < n_vocab]
        llm_single.reset()
        llm_single.eval(tokens)
        single = np.array(llm_single.scores[: len(tokens)], dtype=np.float32)
        llm_prompts.reset()
        llm_prompts.eval(tokens)
        logits = np.array(llm_prompts.scores[: len(tokens)], dtype=np.float32)
        top1, top1_single, top, top_single = [], [], [], []
        for pos, row in enumerate(logits):
            positions += 1
            top1_single.append(int(np.argmax(single[pos])))
            idx_single = np.argsort(-single[pos], kind="stable")[: args.top_k]
            top_single.append([[int(i), float(single[pos][i])] for i in idx_single])
            self_agree += int(np.argmax(row) == top1_single[-1])
            idx = np.argsort(-row, kind="stable")[: args.top_k]
            top1.append(int(idx[0]))
            top.append([[int(i), float(row[i])] for i in idx])
        entry = {"text": prompt, "tokens": [int(t) for t in tokens],
                 "top1": top1, "top1_token_by_token": top1_single, "top": top}
        if args.token_by_token_logits:
            entry["top_token_by_token"] = top_single
        out["prompts"].append(entry)

    if not args.ppl_only:
        out["llamacpp_self_top1_agreement"] = self_agree / positions
    if args.ppl_chunks > 0:
        tokens = llm.tokenize(long_text.encode("utf-8"), add_bos=True, special=False)
        ctx = args.ppl_ctx
        n_chunks = min(args.ppl_chunks, len(tokens) // ctx)
        ppl, count = perplexity(llm, tokens, ctx, n_chunks)
        # The same windows through llama.cpp's token-by-token path: how far llama.cpp's
        # own figure moves with its float summation order.
        ppl_single, _ = perplexity(llm_single, tokens, ctx, n_chunks)
        out["perplexity"] = {"ctx": ctx, "chunks": n_chunks, "scored_tokens": count,
                             "ppl": ppl, "ppl_token_by_token": ppl_single}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}: {len(out['prompts'])} prompts, "
          f"llama.cpp batched vs token-by-token top-1 agreement "
          f"{out['llamacpp_self_top1_agreement']:.4f}"
          + (f", ppl {out['perplexity']['ppl']:.4f}" if "perplexity" in out else ""))


if __name__ == "__main__":
    sys.exit(main())
