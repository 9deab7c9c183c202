#!/usr/bin/env python3
"""Writes Tandem's tiny, deterministic GGUF test fixtures.

Usage: python3 tools/make_fixtures.py OUT_DIR [--verify]

Files (byte-for-byte identical on every run: fixed seeds, no timestamps):
  types.gguf   for every tensor type T that Tandem dequantizes, a tensor `t` of random
               blocks (random quants, sane random fp16 scales) and an F32 tensor
               `t.expected` holding gguf-py's dequantization of it (an implementation
               independent of ours); plus `q8_0.source` (F32) and `q8_0.quantized`
               (gguf-py's Q8_0 quantization of it, bit-exact with ggml's reference).
  gemma3.gguf, llama.gguf, qwen2.gguf, qwen3.gguf, qwen3moe-{q4_k_m,q8_0}.gguf,
  glm4moe-{q4_k_m,q8_0}.gguf, deepseek2-{q4_k_m,q8_0,kv_b-q8_0}.gguf, glm-dsa-{q4_k_m,q8_0}.gguf,
  deepseek32-{q4_k_m,q8_0}.gguf
               random-weight models with the tensor names and metadata llama.cpp
               expects for each architecture, weights in a mix of tensor types, a
               tokenizer (SentencePiece-style "llama" vocab for gemma3/llama, byte-level
               "gpt2" BPE for qwen2/qwen3) and a chat template.

--verify loads and evaluates every model with llama-cpp-python (the oracle; needs the
`llama_cpp` module) and fails unless the logits are finite and not all equal.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import TokenType

QK_K = 256

# ---------------------------------------------------------------------------------------
# Random tensors of each type.
# ---------------------------------------------------------------------------------------

# Byte offsets of the fp16 fields inside one block: ("d", offset) scales the quants,
# ("m", offset) is Q4_1/Q5_1's additive min, ("dmin", offset) the K-quants' min scale.
FP16_FIELDS: dict[QT, list[tuple[str, int]]] = {
    QT.Q4_0: [("d", 0)],
    QT.Q4_1: [("d", 0), ("m", 2)],
    QT.Q5_0: [("d", 0)],
    QT.Q5_1: [("d", 0), ("m", 2)],
    QT.Q8_0: [("d", 0)],
    QT.Q2_K: [("d", 80), ("dmin", 82)],
    QT.Q3_K: [("d", 108)],
    QT.Q4_K: [("d", 0), ("dmin", 2)],
    QT.Q5_K: [("d", 0), ("dmin", 2)],
    QT.Q6_K: [("d", 208)],
}

QUANT_TYPES = list(FP16_FIELDS)


def block_info(qtype: QT) -> tuple[int, int]:
    """(values per block, bytes per block)."""
    return gguf.GGML_QUANT_SIZES[qtype]


def random_fp16_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite fp16 bit patterns: mostly normals in [2^-10, 2^6), some subnormals and zeros."""
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    exp = rng.integers(5, 21, n, dtype=np.uint16)
    kind = rng.integers(0, 16, n)
    exp = np.where(kind == 0, 0, exp).astype(np.uint16)  # 1 in 16: subnormal (or zero)
    mant = rng.integers(0, 1024, n, dtype=np.uint16)
    mant = np.where(kind == 1, 0, mant).astype(np.uint16)  # some exact powers of two
    bits = sign | (exp << 10) | mant
    bits = np.where(kind == 2, np.uint16(0), bits)  # a few +0 scales
    return bits.astype(np.uint16)


def random_blocks(rng: np.random.Generator, qtype: QT, n_blocks: int) -> np.ndarray:
    """[n_blocks, block_bytes] uint8: uniformly random quant bits, finite random fp16 fields."""
    _, type_size = block_info(qtype)
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for _, off in FP16_FIELDS[qtype]:
        bits = random_fp16_bits(rng, n_blocks)
        blocks[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    return blocks


def set_fp16_field(blocks: np.ndarray, off: int, value: float) -> None:
    bits = np.full(blocks.shape[0], value, dtype=np.float16).view(np.uint8)
    blocks[:, off:off + 2] = bits.reshape(-1, 2)


def random_kquant_weight(rng: np.random.Generator, qtype: QT, rows: int, cols: int,
                         std: float) -> np.ndarray:
    """[rows, cols / 256 * type_size] uint8 of random K-quant blocks whose dequantized
    values have mean ~0 and standard deviation ~std (gguf-py cannot quantize K types, and
    random weights need no quantizer: random quants with calibrated scales will do)."""
    block_size, type_size = block_info(qtype)
    n_blocks = rows * cols // block_size
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    fields = dict(FP16_FIELDS[qtype])
    # Dequantize with unit scales to learn the scale-free magnitudes, then pick one
    # d (and dmin) for the whole tensor: d * A - dmin * B with mean 0 and the wanted std.
    set_fp16_field(blocks, fields["d"], 1.0)
    if "dmin" in fields:
        set_fp16_field(blocks, fields["dmin"], 0.0)
    a = gguf.quants.dequantize(blocks, qtype).astype(np.float64)
    ratio = 0.0
    b = np.zeros_like(a)
    if "dmin" in fields:
        set_fp16_field(blocks, fields["d"], 0.0)
        set_fp16_field(blocks, fields["dmin"], 1.0)
        b = -gguf.quants.dequantize(blocks, qtype).astype(np.float64)
        ratio = a.mean() / b.mean()
    scale = std / (a - ratio * b).std()
    set_fp16_field(blocks, fields["d"], scale)
    if "dmin" in fields:
        set_fp16_field(blocks, fields["dmin"], scale * ratio)
    return blocks.reshape(rows, cols // block_size * type_size)


def make_weight(rng: np.random.Generator, qtype: QT, rows: int, cols: int,
                std: float) -> tuple[np.ndarray, QT]:
    """A [rows, cols] weight (ggml ne = [cols, rows]) stored as `qtype`."""
    if qtype in (QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K):
        return random_kquant_weight(rng, qtype, rows, cols, std), qtype
    w = rng.normal(0.0, std, (rows, cols)).astype(np.float32)
    if qtype == QT.F32:
        return w, qtype
    if qtype == QT.F16:
        return w.astype(np.float16), qtype
    return gguf.quants.quantize(w, qtype), qtype


# ---------------------------------------------------------------------------------------
# types.gguf
# ---------------------------------------------------------------------------------------


def write_types(path: Path) -> None:
    rng = np.random.default_rng(20240601)
    w = gguf.GGUFWriter(str(path), "tandem-types")
    w.add_name("tandem dequantization fixture")
    rows, cols = 4, 512

    f32 = rng.normal(0.0, 1.0, (rows, cols)).astype(np.float32)
    f32.reshape(-1)[:4] = [0.0, -0.0, 1e-40, -3.4e38]  # signed zeros, subnormal, large
    w.add_tensor("f32", f32)
    w.add_tensor("f32.expected", gguf.quants.dequantize(f32, QT.F32).copy())

    # Every finite fp16 class: normals, subnormals, zeros, plus the two infinities.
    f16 = rng.integers(0, 1 << 16, rows * cols, dtype=np.uint16)
    f16 = np.where((f16 & 0x7C00) == 0x7C00, f16 & 0x83FF, f16).astype(np.uint16)
    f16[:6] = [0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFC00]
    f16 = f16.view(np.float16).reshape(rows, cols)
    w.add_tensor("f16", f16)
    w.add_tensor("f16.expected", gguf.quants.dequantize(f16.view(np.uint8), QT.F16)
                 .reshape(rows, cols).astype(np.float32))

    bf16 = rng.integers(0, 1 << 16, rows * cols, dtype=np.uint16)
    bf16 = np.where((bf16 & 0x7F80) == 0x7F80, bf16 & 0x807F, bf16).astype(np.uint16)
    bf16[:4] = [0x0000, 0x8000, 0x7F80, 0x0001]
    bf16 = bf16.view(np.uint8).reshape(rows, cols * 2)
    w.add_tensor("bf16", bf16, raw_dtype=QT.BF16)
    w.add_tensor("bf16.expected", gguf.quants.dequantize(bf16, QT.BF16))

    for qtype in QUANT_TYPES:
        block_size, _ = block_info(qtype)
        blocks = random_blocks(rng, qtype, rows * cols // block_size)
        data = blocks.reshape(rows, -1)
        name = qtype.name.lower()
        w.add_tensor(name, data, raw_dtype=qtype)
        w.add_tensor(name + ".expected", gguf.quants.dequantize(data, qtype))

    # Q8_0 quantizer golden: varied block magnitudes, plus exact .5 ties after scaling.
    src = (rng.normal(0.0, 1.0, (rows, cols)) *
           np.exp(rng.uniform(-6, 3, (rows, cols // 32, 1))).repeat(32, axis=2)
           .reshape(rows, cols)).astype(np.float32)
    src[0, :32] = np.arange(32, dtype=np.float32) - 15.5  # amax 15.5 -> many ties
    src[1, :32] = 0.0
    w.add_tensor("q8_0.source", src)
    w.add_tensor("q8_0.quantized", gguf.quants.quantize(src, QT.Q8_0), raw_dtype=QT.Q8_0)
    finish(w)


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------------------
# Tokenizers.
# ---------------------------------------------------------------------------------------

# Small English corpus: source of SentencePiece pieces and BPE merges.
CORPUS = """
The quick brown fox jumps over the lazy dog. Hello world! This is a test of the tiny
model that Tandem uses in its unit tests. It has a small vocabulary, a few layers and
random weights, so it says nothing useful, but every number it makes can be checked.
Once upon a time there was a little language model. It liked to read and write, and
it wanted to learn what people were saying. What is your name? My name is Tandem.
How are you today? I am fine, thank you. The system prompt says: you are a helpful
assistant. Please answer the question in one sentence. Numbers: 0 1 2 3 4 5 6 7 8 9 10
100 2024. Code: def main(): return 0 if x == 1 else print("hello") # comment
The user asked for the weather, and the assistant called a tool to find it out.
"""

WORD_RE = re.compile(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+")


def corpus_words() -> list[str]:
    return WORD_RE.findall(CORPUS)


@dataclass
class Vocab:
    model: str                 # tokenizer.ggml.model
    pre: str | None            # tokenizer.ggml.pre
    tokens: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)
    special: dict[str, int] = field(default_factory=dict)  # "bos" -> id, ...
    add_bos: bool = True
    add_space_prefix: bool | None = None
    chat_template: str = ""

    def add(self, text: str, ttype: int, score: float = 0.0) -> int:
        assert text not in self.tokens, text
        self.tokens.append(text)
        self.types.append(int(ttype))
        self.scores.append(float(score))
        return len(self.tokens) - 1


def spm_vocab(specials: list[tuple[str, TokenType, str | None]]) -> Vocab:
    """A SentencePiece-style vocab: `specials` (text, type, role), the 256 byte-fallback
    tokens <0x00>..<0xFF>, then pieces with '▁' for spaces. Every piece's prefixes are in
    the vocab, so llama.cpp's bigram merging can always reach a whole word."""
    v = Vocab(model="llama", pre="default")
    for text, ttype, role in specials:
        tid = v.add(text, ttype)
        if role:
            v.special[role] = tid
    for b in range(256):
        v.add(f"<0x{b:02X}>", TokenType.BYTE)
    pieces: list[str] = ["▁"] + [chr(c) for c in range(33, 127)]
    for word in corpus_words():
        if word.isspace():
            continue
        piece = word.replace(" ", "▁")
        pieces.extend(piece[:k] for k in range(2, len(piece) + 1))
    seen: set[str] = set()
    ordered = []
    for p in sorted(pieces, key=len):  # stable: shorter pieces first, corpus order within
        if p not in seen:
            seen.add(p)
            ordered.append(p)
    for i, p in enumerate(ordered):
        # Higher score merges first: short pieces first, like BPE's merge order.
        v.add(p, TokenType.NORMAL, score=-float(i))
    return v


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode mapping used by byte-level BPE."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocab(n_merges: int, specials: list[tuple[str, TokenType, str | None]]) -> Vocab:
    """A byte-level BPE vocab ("gpt2" model, "qwen2" pre-tokenizer): the 256 byte
    symbols, `n_merges` merges learned on CORPUS (ties broken lexicographically, so the
    result is deterministic), then the special tokens."""
    v = Vocab(model="gpt2", pre="qwen2", add_bos=False)
    b2u = byte_to_unicode()
    for b in sorted(b2u, key=lambda b: ord(b2u[b])):
        v.add(b2u[b], TokenType.NORMAL)
    words: dict[tuple[str, ...], int] = {}
    for word in corpus_words():
        sym = tuple(b2u[b] for b in word.encode("utf-8"))
        words[sym] = words.get(sym, 0) + 1
    for _ in range(n_merges):
        pairs: dict[tuple[str, str], int] = {}
        for sym, count in words.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        v.merges.append(f"{best[0]} {best[1]}")
        v.add(best[0] + best[1], TokenType.NORMAL)
        merged: dict[tuple[str, ...], int] = {}
        for sym, count in words.items():
            out: list[str] = []
            i = 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        words = merged
    for text, ttype, role in specials:
        tid = v.add(text, ttype)
        if role:
            v.special[role] = tid
    return v


GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

LLAMA2_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set system = '<<SYS>>\n' + messages[0]['content'] + '\n<</SYS>>\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set system = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ bos_token + '[INST] ' + (system if loop.first else '') + message['content'] | trim + ' [/INST]' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ ' ' + message['content'] | trim + ' ' + eos_token }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)


def gemma_vocab() -> Vocab:
    v = spm_vocab([
        ("<pad>", TokenType.CONTROL, "pad"),
        ("<eos>", TokenType.CONTROL, "eos"),
        ("<bos>", TokenType.CONTROL, "bos"),
        ("<unk>", TokenType.UNKNOWN, "unk"),
        ("<start_of_turn>", TokenType.CONTROL, None),
        ("<end_of_turn>", TokenType.CONTROL, None),
    ])
    v.add_space_prefix = False
    v.chat_template = GEMMA_TEMPLATE
    return v


def llama_vocab() -> Vocab:
    v = spm_vocab([
        ("<unk>", TokenType.UNKNOWN, "unk"),
        ("<s>", TokenType.CONTROL, "bos"),
        ("</s>", TokenType.CONTROL, "eos"),
    ])
    v.add_space_prefix = True
    v.chat_template = LLAMA2_TEMPLATE
    return v


def qwen_vocab(thinking: bool) -> Vocab:
    specials = [
        ("<|endoftext|>", TokenType.CONTROL, "bos"),
        ("<|im_start|>", TokenType.CONTROL, None),
        ("<|im_end|>", TokenType.CONTROL, "eos"),
    ]
    if thinking:
        specials += [
            ("<tool_call>", TokenType.USER_DEFINED, None),
            ("</tool_call>", TokenType.USER_DEFINED, None),
            ("<think>", TokenType.USER_DEFINED, None),
            ("</think>", TokenType.USER_DEFINED, None),
        ]
    v = bpe_vocab(n_merges=300, specials=specials)
    v.special["pad"] = v.special["bos"]
    v.chat_template = CHATML_TEMPLATE
    return v


def glm_vocab() -> Vocab:
    """Byte-level BPE with GLM-4.5's special tokens and its chat template (the one the
    template golden tests render: tests/data/templates/glm45.jinja)."""
    specials = [
        ("<|endoftext|>", TokenType.CONTROL, "eos"),
        ("[gMASK]", TokenType.CONTROL, "bos"),
        ("<sop>", TokenType.CONTROL, None),
        ("<|system|>", TokenType.CONTROL, None),
        ("<|user|>", TokenType.CONTROL, None),
        ("<|assistant|>", TokenType.CONTROL, None),
        ("<|observation|>", TokenType.CONTROL, None),
    ] + [(t, TokenType.USER_DEFINED, None) for t in (
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
        "<arg_value>", "</arg_value>", "<tool_response>", "</tool_response>")]
    v = bpe_vocab(n_merges=300, specials=specials)
    v.special["pad"] = v.special["eos"]
    v.pre = "glm4"
    v.add_bos = False
    template = Path(__file__).resolve().parent.parent / "tests" / "data" / "templates" / "glm45.jinja"
    v.chat_template = template.read_text(encoding="utf-8")
    return v


def qwen3_template() -> str:
    path = Path(__file__).resolve().parent.parent / "tests" / "data" / "templates" / "qwen3.jinja"
    return path.read_text(encoding="utf-8")


def write_vocab(w: gguf.GGUFWriter, v: Vocab) -> None:
    w.add_string("tokenizer.ggml.model", v.model)
    if v.pre is not None:
        w.add_string("tokenizer.ggml.pre", v.pre)
    w.add_array("tokenizer.ggml.tokens", v.tokens)
    if v.model == "llama":
        w.add_array("tokenizer.ggml.scores", v.scores)
    w.add_array("tokenizer.ggml.token_type", v.types)
    if v.merges:
        w.add_array("tokenizer.ggml.merges", v.merges)
    for role in ("bos", "eos", "unk", "pad"):
        if role in v.special:
            key = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
                   "pad": "padding_token_id"}[role]
            w.add_uint32(f"tokenizer.ggml.{key}", v.special[role])
    w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    if v.add_space_prefix is not None:
        w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix)
    w.add_string("tokenizer.chat_template", v.chat_template)


# ---------------------------------------------------------------------------------------
# Models.
# ---------------------------------------------------------------------------------------


@dataclass
class ModelSpec:
    arch: str
    n_layer: int
    seed: int
    vocab: Vocab
    tied_output: bool
    qk_norm: bool = False         # attn_q_norm / attn_k_norm [head_dim]
    qkv_bias: bool = False        # attn_{q,k,v}.bias
    post_norms: bool = False      # gemma: post_attention_norm, post_ffw_norm
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 256               # a multiple of 256 so ffn_down (ne0 = n_ff) takes K-quants
    n_ctx: int = 256
    rope_base: float = 10000.0
    rms_eps: float = 1e-6
    extra_kv: dict = field(default_factory=dict)  # suffix -> float/int value
    embd_type: QT = QT.F32
    output_type: QT = QT.F32
    # Per layer i, cycling: (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down)
    layer_types: list[tuple[QT, ...]] = field(default_factory=list)
    name: str = ""                # file stem (default: arch)
    rope_dims: int = 0            # 0: head_dim
    ffn_norm_name: str = "ffn_norm"
    # Mixture of experts (n_expert > 0): layers >= n_dense_lead route each token to
    # n_expert_used experts of width n_ff_exp; n_expert_shared shared experts.
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_expert_shared: int = 0
    n_dense_lead: int = 0
    probs_bias: bool = False      # exp_probs_b.bias (glm4moe's selection bias)
    n_nextn: int = 0              # NextN/MTP blocks after the trunk
    # Per MoE layer, cycling: (ffn_gate_exps, ffn_up_exps, ffn_down_exps, shexp types)
    moe_types: list[tuple[QT, ...]] = field(default_factory=list)
    # Multi-head latent attention (deepseek2): q_lora, kv_lora, nope, rope, v_head dims
    # and the types (attn_q_a or attn_q, attn_q_b, attn_kv_a_mqa, attn_k_b, attn_v_b,
    # attn_output).
    mla: dict = field(default_factory=dict)
    mla_types: tuple = ()
    # DeepSeek sparse attention's lightning indexer (glm-dsa): heads, head dim, top_k,
    # per-layer "full" flags (None: no indexer.types key, every layer full) and the types
    # of indexer.attn_q_b and indexer.attn_k (indexer.proj stays F32, as converted).
    dsa: dict = field(default_factory=dict)
    fan_in_std: bool = False      # scale matrix stds by sqrt(64 / cols)


def write_model(path: Path, spec: ModelSpec) -> None:
    rng = np.random.default_rng(spec.seed)
    a = spec.arch
    w = gguf.GGUFWriter(str(path), a)
    w.add_name(f"tandem-tiny-{a}")
    w.add_uint32("general.quantization_version", 2)
    w.add_uint32(f"{a}.context_length", spec.n_ctx)
    w.add_uint32(f"{a}.embedding_length", spec.n_embd)
    w.add_uint32(f"{a}.block_count", spec.n_layer + spec.n_nextn)
    w.add_uint32(f"{a}.feed_forward_length", spec.n_ff)
    w.add_uint32(f"{a}.attention.head_count", spec.n_head)
    if spec.mla and spec.mla.get("joint_kv_b"):
        # An older conversion: MHA-style head sizes, no *_mla keys, one attn_kv_b.
        m = spec.mla
        w.add_uint32(f"{a}.attention.head_count_kv", spec.n_head)
        w.add_uint32(f"{a}.attention.key_length", m["nope"] + m["rope"])
        w.add_uint32(f"{a}.attention.value_length", m["v_head"])
        w.add_uint32(f"{a}.attention.q_lora_rank", m["q_lora"])
        w.add_uint32(f"{a}.attention.kv_lora_rank", m["kv_lora"])
    elif spec.mla:
        m = spec.mla
        w.add_uint32(f"{a}.attention.head_count_kv", 1)
        w.add_uint32(f"{a}.attention.key_length", m["kv_lora"] + m["rope"])
        w.add_uint32(f"{a}.attention.value_length", m["kv_lora"])
        w.add_uint32(f"{a}.attention.key_length_mla", m["nope"] + m["rope"])
        w.add_uint32(f"{a}.attention.value_length_mla", m["v_head"])
        w.add_uint32(f"{a}.attention.q_lora_rank", m["q_lora"])
        w.add_uint32(f"{a}.attention.kv_lora_rank", m["kv_lora"])
    else:
        w.add_uint32(f"{a}.attention.head_count_kv", spec.n_head_kv)
        w.add_uint32(f"{a}.attention.key_length", spec.head_dim)
        w.add_uint32(f"{a}.attention.value_length", spec.head_dim)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", spec.rms_eps)
    w.add_uint32(f"{a}.rope.dimension_count", spec.rope_dims or spec.head_dim)
    w.add_float32(f"{a}.rope.freq_base", spec.rope_base)
    w.add_uint32(f"{a}.vocab_size", len(spec.vocab.tokens))
    if spec.n_expert:
        w.add_uint32(f"{a}.expert_count", spec.n_expert)
        w.add_uint32(f"{a}.expert_used_count", spec.n_expert_used)
        w.add_uint32(f"{a}.expert_feed_forward_length", spec.n_ff_exp)
    if spec.n_nextn:
        w.add_uint32(f"{a}.nextn_predict_layers", spec.n_nextn)
    if spec.dsa:
        w.add_uint32(f"{a}.attention.indexer.head_count", spec.dsa["heads"])
        w.add_uint32(f"{a}.attention.indexer.key_length", spec.dsa["dim"])
        w.add_uint32(f"{a}.attention.indexer.top_k", spec.dsa["top_k"])
        if spec.dsa.get("full") is not None:
            w.add_array(f"{a}.attention.indexer.types", [bool(f) for f in spec.dsa["full"]])
    for suffix, value in spec.extra_kv.items():
        if isinstance(value, bool):
            w.add_bool(f"{a}.{suffix}", value)
        elif isinstance(value, str):
            w.add_string(f"{a}.{suffix}", value)
        elif isinstance(value, float):
            w.add_float32(f"{a}.{suffix}", value)
        else:
            w.add_uint32(f"{a}.{suffix}", value)
    write_vocab(w, spec.vocab)

    n_vocab = len(spec.vocab.tokens)
    d, hd = spec.n_embd, spec.head_dim
    q_dim, kv_dim = spec.n_head * hd, spec.n_head_kv * hd

    def norm(n: int) -> np.ndarray:
        return (1.0 + rng.normal(0.0, 0.1, n)).astype(np.float32)

    def fan_in(std: float, cols: int) -> float:
        # The stds below are for 64 inputs; wider sparse fixtures scale them by fan-in so
        # activations keep the dense fixtures' magnitudes (hotter ones make attention and
        # routing near-ties, where llama.cpp disagrees even with itself).
        return std * (64 / cols) ** 0.5 if spec.fan_in_std else std

    # Sparse fixtures: the projections back into the residual stream are kept small, as
    # in trained models, so one layer's update (one expert more or less) moves the
    # stream a little instead of replacing it.
    out_scale = 0.25 if spec.fan_in_std else 1.0

    def matrix(name: str, qtype: QT, rows: int, cols: int, std: float) -> None:
        if name not in ("token_embd.weight", "output.weight"):
            std = fan_in(std, cols)
        data, raw = make_weight(rng, qtype, rows, cols, std)
        w.add_tensor(name, data, raw_dtype=None if raw in (QT.F32, QT.F16) else raw)

    # Tied models reuse token_embd as the output matrix: keep it small enough that logits
    # have a std of about 1-2 (peaked enough to rank, flat enough to compare).
    matrix("token_embd.weight", spec.embd_type, n_vocab, d, 0.25 if spec.tied_output else 1.0)
    w.add_tensor("output_norm.weight", norm(d))
    if not spec.tied_output:
        matrix("output.weight", spec.output_type, n_vocab, d, 0.25)
    def stack(name: str, qtype: QT, count: int, rows: int, cols: int, std: float) -> None:
        """A 3-D tensor of `count` matrices [rows, cols] (ggml ne = [cols, rows, count])."""
        data, raw = make_weight(rng, qtype, count * rows, cols, fan_in(std, cols))
        data = data.reshape(count, rows, data.shape[-1])
        w.add_tensor(name, data, raw_dtype=None if raw in (QT.F32, QT.F16) else raw)

    def experts(name: str, qtype: QT, rows: int, cols: int, std: float) -> None:
        stack(name, qtype, spec.n_expert, rows, cols, std)

    for i in range(spec.n_layer + spec.n_nextn):
        p = f"blk.{i}."
        tq, tk, tv, to, tg, tu, td = spec.layer_types[i % len(spec.layer_types)]
        w.add_tensor(p + "attn_norm.weight", norm(d))
        if spec.mla:
            write_mla_attention(w, spec, p, matrix, norm, stack, out_scale)
            full = spec.dsa.get("full") if spec.dsa else None
            if spec.dsa and (full is None or i >= spec.n_layer or full[i]):
                write_indexer(w, spec, p, matrix, rng)
        else:
            matrix(p + "attn_q.weight", tq, q_dim, d, 0.25)
            matrix(p + "attn_k.weight", tk, kv_dim, d, 0.25)
            matrix(p + "attn_v.weight", tv, kv_dim, d, 0.25)
        if spec.qkv_bias:
            w.add_tensor(p + "attn_q.bias", rng.normal(0, 0.1, q_dim).astype(np.float32))
            w.add_tensor(p + "attn_k.bias", rng.normal(0, 0.1, kv_dim).astype(np.float32))
            w.add_tensor(p + "attn_v.bias", rng.normal(0, 0.1, kv_dim).astype(np.float32))
        if spec.qk_norm:
            w.add_tensor(p + "attn_q_norm.weight", norm(hd))
            w.add_tensor(p + "attn_k_norm.weight", norm(hd))
        if not spec.mla:
            matrix(p + "attn_output.weight", to, d, q_dim, 0.15 * out_scale)
        if spec.post_norms:
            w.add_tensor(p + "post_attention_norm.weight", norm(d))
        w.add_tensor(p + spec.ffn_norm_name + ".weight", norm(d))
        if spec.n_expert and i >= spec.n_dense_lead:
            te, tue, tde, tsh = spec.moe_types[i % len(spec.moe_types)]
            # The router stays F32, as llama.cpp's quantizer leaves ffn_gate_inp. Router
            # logits of std ~1.5: a sigmoid router is not saturated (saturated scores
            # make near ties of the top-k choice).
            matrix(p + "ffn_gate_inp.weight", QT.F32, spec.n_expert, d, 0.2)
            if spec.probs_bias:
                w.add_tensor(p + "exp_probs_b.bias",
                             rng.normal(0.0, 0.05, spec.n_expert).astype(np.float32))
            experts(p + "ffn_gate_exps.weight", te, spec.n_ff_exp, d, 0.25)
            experts(p + "ffn_up_exps.weight", tue, spec.n_ff_exp, d, 0.25)
            experts(p + "ffn_down_exps.weight", tde, d, spec.n_ff_exp, 0.1 * out_scale)
            if spec.n_expert_shared:
                n_sh = spec.n_ff_exp * spec.n_expert_shared
                matrix(p + "ffn_gate_shexp.weight", tsh, n_sh, d, 0.25)
                matrix(p + "ffn_up_shexp.weight", tsh, n_sh, d, 0.25)
                matrix(p + "ffn_down_shexp.weight", tsh, d, n_sh, 0.1 * out_scale)
        else:
            matrix(p + "ffn_gate.weight", tg, spec.n_ff, d, 0.25)
            matrix(p + "ffn_up.weight", tu, spec.n_ff, d, 0.25)
            matrix(p + "ffn_down.weight", td, d, spec.n_ff, 0.1 * out_scale)
        if spec.post_norms:
            w.add_tensor(p + "post_ffw_norm.weight", norm(d))
        if i >= spec.n_layer:  # a NextN block's own tensors
            matrix(p + "nextn.eh_proj.weight", QT.Q8_0, d, 2 * d, 0.15)
            w.add_tensor(p + "nextn.enorm.weight", norm(d))
            w.add_tensor(p + "nextn.hnorm.weight", norm(d))
            w.add_tensor(p + "nextn.shared_head_norm.weight", norm(d))
    finish(w)


def write_mla_attention(w, spec: ModelSpec, p: str, matrix, norm, stack, out_scale: float) -> None:
    """deepseek2's MLA tensors in the split (attn_k_b / attn_v_b) form llama.cpp writes."""
    m, d, h = spec.mla, spec.n_embd, spec.n_head
    tqa, tqb, tkva, tkb, tvb, to = spec.mla_types
    q_head = m["nope"] + m["rope"]
    if m["q_lora"] > 0:
        matrix(p + "attn_q_a.weight", tqa, m["q_lora"], d, 0.25)
        w.add_tensor(p + "attn_q_a_norm.weight", norm(m["q_lora"]))
        matrix(p + "attn_q_b.weight", tqb, h * q_head, m["q_lora"], 0.25)
    else:
        matrix(p + "attn_q.weight", tqa, h * q_head, d, 0.25)
    matrix(p + "attn_kv_a_mqa.weight", tkva, m["kv_lora"] + m["rope"], d, 0.25)
    w.add_tensor(p + "attn_kv_a_norm.weight", norm(m["kv_lora"]))
    if m.get("joint_kv_b"):
        matrix(p + "attn_kv_b.weight", tkb, h * (m["nope"] + m["v_head"]), m["kv_lora"], 0.25)
    else:
        stack(p + "attn_k_b.weight", tkb, h, m["kv_lora"], m["nope"], 0.25)
        stack(p + "attn_v_b.weight", tvb, h, m["v_head"], m["kv_lora"], 0.25)
    matrix(p + "attn_output.weight", to, d, h * m["v_head"], 0.15 * out_scale)


def write_indexer(w, spec: ModelSpec, p: str, matrix, rng: np.random.Generator) -> None:
    """A DeepSeek-sparse-attention layer's lightning indexer: its query from the q_lora
    path, one LayerNorm'd key, per-head weights (F32)."""
    x, d = spec.dsa, spec.n_embd
    tqb, tk = x["types"]
    matrix(p + "indexer.attn_q_b.weight", tqb, x["heads"] * x["dim"], spec.mla["q_lora"], 0.25)
    matrix(p + "indexer.attn_k.weight", tk, x["dim"], d, 0.25)
    w.add_tensor(p + "indexer.k_norm.weight", (1.0 + rng.normal(0.0, 0.1, x["dim"])).astype(np.float32))
    w.add_tensor(p + "indexer.k_norm.bias", rng.normal(0.0, 0.1, x["dim"]).astype(np.float32))
    matrix(p + "indexer.proj.weight", QT.F32, x["heads"], d, 0.25)


def model_specs() -> list[ModelSpec]:
    return [
        # Gemma 3: llama.cpp hard-codes the sliding-window pattern (every 6th layer is
        # global, the rest use `sliding_window`) and the local rope base 10000; 6 layers
        # give 5 sliding layers and 1 global one. Tied embeddings (no output.weight).
        ModelSpec(
            arch="gemma3", n_layer=6, seed=3, vocab=gemma_vocab(), tied_output=True,
            qk_norm=True, post_norms=True, rope_base=1000000.0,
            extra_kv={"attention.sliding_window": 8, "rope.freq_base_swa": 10000.0},
            embd_type=QT.Q8_0,
            layer_types=[
                (QT.Q5_0, QT.Q5_0, QT.Q8_0, QT.Q5_0, QT.Q5_0, QT.Q5_0, QT.Q4_K),
                (QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q6_K),
                (QT.Q4_0, QT.Q4_1, QT.Q5_1, QT.Q4_0, QT.Q4_1, QT.Q5_1, QT.Q5_K),
                (QT.F16, QT.BF16, QT.F32, QT.F16, QT.BF16, QT.F32, QT.Q3_K),
                (QT.Q5_0, QT.Q8_0, QT.Q5_0, QT.Q8_0, QT.Q5_0, QT.Q8_0, QT.Q2_K),
                (QT.Q8_0, QT.Q5_0, QT.Q4_0, QT.Q5_1, QT.F16, QT.Q8_0, QT.Q8_0),
            ]),
        # Llama: untied output.weight, GQA, no biases.
        ModelSpec(
            arch="llama", n_layer=4, seed=1, vocab=llama_vocab(), tied_output=False,
            rope_base=10000.0, rms_eps=1e-5, embd_type=QT.F16, output_type=QT.Q8_0,
            layer_types=[
                (QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q4_0, QT.Q4_0, QT.Q6_K),
                (QT.F16, QT.F16, QT.F16, QT.F16, QT.Q5_1, QT.Q5_1, QT.Q4_K),
                (QT.BF16, QT.Q5_0, QT.Q4_1, QT.F32, QT.Q8_0, QT.F16, QT.Q5_K),
                (QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.BF16, QT.Q8_0, QT.Q2_K),
            ]),
        # Qwen2: q/k/v biases, untied output, byte-level BPE vocab.
        ModelSpec(
            arch="qwen2", n_layer=3, seed=2, vocab=qwen_vocab(thinking=False),
            tied_output=False, qkv_bias=True, rope_base=1000000.0,
            embd_type=QT.Q4_0, output_type=QT.F16,
            layer_types=[
                (QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q3_K),
                (QT.Q5_0, QT.Q5_0, QT.Q8_0, QT.Q5_0, QT.Q5_0, QT.Q5_0, QT.Q6_K),
                (QT.F16, QT.BF16, QT.Q4_1, QT.Q5_1, QT.Q4_0, QT.F32, QT.Q4_K),
            ]),
        # Qwen3: q/k RMS norms, tied embeddings, thinking/tool special tokens.
        ModelSpec(
            arch="qwen3", n_layer=4, seed=4, vocab=qwen_vocab(thinking=True),
            tied_output=True, qk_norm=True, rope_base=1000000.0, embd_type=QT.BF16,
            layer_types=[
                (QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q8_0, QT.Q5_K),
                (QT.Q4_0, QT.Q4_0, QT.Q4_1, QT.Q4_0, QT.Q4_1, QT.Q4_0, QT.Q6_K),
                (QT.Q5_0, QT.Q5_1, QT.Q5_0, QT.Q5_1, QT.Q5_0, QT.Q5_1, QT.Q4_K),
                (QT.F16, QT.F16, QT.BF16, QT.F32, QT.F16, QT.BF16, QT.Q2_K),
            ]),
    ] + moe_specs()


# Sparse models: realistic ratios in miniature (64 experts, top-8, hidden 256 so the
# expert matrices take K-quants). Two quantizations of each architecture: the types of
# llama.cpp's Q4_K_M recipe (Q4_K, with Q6_K for V and the down projections), and Q8_0
# throughout.
Q4_K_M_ATTN = (QT.Q4_K, QT.Q4_K, QT.Q6_K, QT.Q4_K, QT.Q4_K, QT.Q4_K, QT.Q6_K)
Q8_0_ATTN = (QT.Q8_0,) * 7


def moe_specs() -> list[ModelSpec]:
    qwen = qwen_vocab(thinking=True)
    qwen.chat_template = qwen3_template()
    common = dict(fan_in_std=True, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=768, n_ctx=1024, n_expert=64,
                  n_expert_used=8, n_ff_exp=256, rope_base=1000000.0)
    specs = []
    # Expert types cycle per layer: Q4_K_M's (Q4_K, Q6_K down) and Q5_K_M's; Q8_0, BF16,
    # and Q5_0/Q4_0 (the types the load-time repacking would rewrite: experts must stay mapped).
    for quant, attn, moe in (("q4_k_m", Q4_K_M_ATTN, [(QT.Q4_K, QT.Q4_K, QT.Q6_K, QT.Q6_K),
                                                       (QT.Q5_K, QT.Q5_K, QT.Q6_K, QT.Q5_K)]),
                             ("q8_0", Q8_0_ATTN, [(QT.Q8_0,) * 4, (QT.BF16,) * 4,
                                                  (QT.Q5_0, QT.Q4_0, QT.Q5_0, QT.Q8_0)])):
        # Qwen3-MoE: softmax router, normalized top-8, no shared expert, QK-norm.
        specs.append(ModelSpec(
            arch="qwen3moe", name=f"qwen3moe-{quant}", n_layer=3, seed=11, vocab=qwen,
            tied_output=False, qk_norm=True, embd_type=QT.Q8_0,
            output_type=QT.Q6_K if quant == "q4_k_m" else QT.Q8_0,
            layer_types=[attn], moe_types=moe, **common))
        # GLM-4.5-style: one leading dense layer, sigmoid router with the selection
        # bias, normalized weights x 2.5, one shared expert, partial RoPE, Q/K/V biases,
        # a NextN block; the Q8_0 file also has grouped selection (4 groups, best 2)
        # and per-head Q/K norms.
        extra = {"leading_dense_block_count": 1, "expert_shared_count": 1,
                 "expert_weights_scale": 2.5, "expert_weights_norm": True,
                 "expert_gating_func": 2}
        if quant == "q8_0":
            extra.update({"expert_group_count": 4, "expert_group_used_count": 2})
        specs.append(ModelSpec(
            arch="glm4moe", name=f"glm4moe-{quant}", n_layer=3, seed=12, vocab=glm_vocab(),
            tied_output=False, qkv_bias=True, qk_norm=quant == "q8_0", rope_dims=32,
            ffn_norm_name="post_attention_norm", n_expert_shared=1, n_dense_lead=1,
            probs_bias=True, n_nextn=1, extra_kv=extra, embd_type=QT.Q8_0,
            output_type=QT.Q6_K if quant == "q4_k_m" else QT.Q8_0,
            layer_types=[attn], moe_types=moe, **common))
        # DeepSeek-V3-style (deepseek2): MLA with a low-rank query, YaRN RoPE (factor 4
        # over a 64-token original context, so the fixture's positions use it), sigmoid
        # router with the selection bias, grouped top-k, normalized weights x 2.5, a
        # shared expert, a leading dense layer, a NextN block. The Q8_0 file is
        # DeepSeek-V2-Lite-style: a plain attn_q, softmax router, no YaRN.
        v3 = quant == "q4_k_m"
        extra = {"leading_dense_block_count": 1, "expert_shared_count": 1}
        if v3:
            extra.update({"expert_gating_func": 2, "expert_weights_norm": True, "expert_weights_scale": 2.5,
                          "expert_group_count": 8, "expert_group_used_count": 4,
                          "rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
                          "rope.scaling.original_context_length": 64,
                          "rope.scaling.yarn_log_multiplier": 0.0707})
        else:
            extra.update({"expert_gating_func": 1, "expert_weights_scale": 1.0})
        mla_types = ((QT.Q4_K, QT.Q8_0, QT.Q6_K, QT.Q8_0, QT.Q8_0, QT.Q4_K) if v3 else (QT.Q8_0,) * 6)
        specs.append(ModelSpec(
            arch="deepseek2", name=f"deepseek2-{quant}", n_layer=3, seed=13, vocab=qwen,
            tied_output=False, rope_dims=32, n_expert_shared=1, n_dense_lead=1, probs_bias=v3,
            n_nextn=1 if v3 else 0, extra_kv=extra, embd_type=QT.Q8_0,
            output_type=QT.Q6_K if v3 else QT.Q8_0,
            mla={"q_lora": 128 if v3 else 0, "kv_lora": 128, "nope": 32, "rope": 32, "v_head": 64},
            mla_types=mla_types, layer_types=[attn], moe_types=moe, **common))
        # GLM-5-style (glm-dsa): deepseek2's MLA with a low-rank query plus the lightning
        # indexer (8 heads of 64, top 16 positions per query: prompts past 16 tokens
        # attend sparsely), sigmoid router with the selection bias, normalized weights
        # x 2.5, a shared expert, a leading dense layer, a NextN block. The Q4_K_M file
        # has a GLM-5.2-style indexer.types: its middle layer reuses layer 0's choice.
        extra = {"leading_dense_block_count": 1, "expert_shared_count": 1, "expert_gating_func": 2,
                 "expert_weights_norm": True, "expert_weights_scale": 2.5}
        specs.append(ModelSpec(
            arch="glm-dsa", name=f"glm-dsa-{quant}", n_layer=3, seed=15, vocab=glm_vocab(),
            tied_output=False, rope_dims=32, n_expert_shared=1, n_dense_lead=1, probs_bias=True,
            n_nextn=1, extra_kv=extra, embd_type=QT.Q8_0, output_type=QT.Q6_K if v3 else QT.Q8_0,
            mla={"q_lora": 128, "kv_lora": 128, "nope": 32, "rope": 32, "v_head": 64},
            mla_types=mla_types if v3 else (QT.Q8_0,) * 6,
            dsa={"heads": 8, "dim": 64, "top_k": 16, "full": [1, 0, 1] if v3 else None,
                 "types": (QT.Q8_0, QT.Q4_K) if v3 else (QT.Q8_0, QT.Q8_0)},
            layer_types=[attn], moe_types=moe, **common))
        # DeepSeek-V3.2-style (deepseek32): deepseek2's MLA with a low-rank query plus the
        # lightning indexer on every layer (no indexer.types key; NEOX RoPE and a 1e-6
        # LayerNorm in the indexer, where glm-dsa has adjacent pairs and 0), top 16
        # positions per query, a leading dense layer, a shared expert and a NextN block
        # (with its own indexer, as llama.cpp requires), DeepSeek-V3's sigmoid routing with
        # the selection bias, normalized weights x 2.5. The Q4_K_M file has deepseek2's
        # YaRN (read by llama.cpp for deepseek32, not for glm-dsa), grouped top-k and an
        # indexer of 8 heads of 64; the Q8_0 file no YaRN, no groups, 8 heads of 128.
        extra = {"leading_dense_block_count": 1, "expert_shared_count": 1, "expert_gating_func": 2,
                 "expert_weights_norm": True, "expert_weights_scale": 2.5}
        if v3:
            extra.update({"expert_group_count": 8, "expert_group_used_count": 4,
                          "rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
                          "rope.scaling.original_context_length": 64,
                          "rope.scaling.yarn_log_multiplier": 0.0707})
        specs.append(ModelSpec(
            arch="deepseek32", name=f"deepseek32-{quant}", n_layer=3, seed=16, vocab=qwen,
            tied_output=False, rope_dims=32, n_expert_shared=1, n_dense_lead=1, probs_bias=True,
            n_nextn=1, extra_kv=extra, embd_type=QT.Q8_0, output_type=QT.Q6_K if v3 else QT.Q8_0,
            mla={"q_lora": 128, "kv_lora": 128, "nope": 32, "rope": 32, "v_head": 64},
            mla_types=mla_types if v3 else (QT.Q8_0,) * 6,
            dsa={"heads": 8, "dim": 64 if v3 else 128, "top_k": 16, "full": None,
                 "types": (QT.Q8_0, QT.Q4_K) if v3 else (QT.Q8_0, QT.Q8_0)},
            layer_types=[attn], moe_types=moe, **common))
    # An older deepseek2 conversion (DeepSeek-V2-Lite as first converted): the joint
    # attn_kv_b and MHA-style head sizes; llama.cpp runs it unabsorbed, Tandem splits it.
    specs.append(ModelSpec(
        arch="deepseek2", name="deepseek2-kv_b-q8_0", n_layer=3, seed=14, vocab=qwen, tied_output=False,
        rope_dims=32, n_expert_shared=1, n_dense_lead=1,
        extra_kv={"leading_dense_block_count": 1, "expert_shared_count": 1, "expert_gating_func": 1},
        embd_type=QT.Q8_0, output_type=QT.Q8_0,
        mla={"q_lora": 0, "kv_lora": 128, "nope": 32, "rope": 32, "v_head": 64, "joint_kv_b": True},
        mla_types=(QT.Q8_0,) * 6, layer_types=[Q8_0_ATTN], moe_types=[(QT.Q8_0,) * 4], **common))
    return specs


# ---------------------------------------------------------------------------------------
# Verification with llama.cpp (optional).
# ---------------------------------------------------------------------------------------


def verify_with_llama_cpp(path: Path) -> str:
    """Loads `path` in llama-cpp-python, evaluates a prompt, returns a one-line report."""
    from llama_cpp import Llama  # imported lazily: only --verify needs it

    llm = Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False, seed=0)
    tokens = llm.tokenize(b"Hello world! The quick brown fox jumps over the lazy dog.")
    llm.eval(tokens)
    logits = np.array(llm.scores[:len(tokens)], dtype=np.float32)
    if not np.isfinite(logits).all():
        raise RuntimeError(f"{path.name}: non-finite logits")
    if np.ptp(logits) == 0 or np.min(np.ptp(logits, axis=1)) == 0:
        raise RuntimeError(f"{path.name}: degenerate logits")
    return (f"{path.name}: {len(tokens)} tokens, logits std {logits.std():.3f}, "
            f"range [{logits.min():.2f}, {logits.max():.2f}]")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--verify", action="store_true",
                        help="load and evaluate every model with llama-cpp-python")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    written = ["types.gguf"]
    write_types(args.out_dir / "types.gguf")
    for spec in model_specs():
        name = f"{spec.name or spec.arch}.gguf"
        write_model(args.out_dir / name, spec)
        written.append(name)
    if args.verify:
        for name in written[1:]:
            print(verify_with_llama_cpp(args.out_dir / name))
    print(f"make_fixtures: wrote {len(written)} files to {args.out_dir}: {' '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
