#!/usr/bin/env python3
"""Small Hugging Face tokenizers in the configuration of each model family Tandem serves.

`train_tokenizer(family, out_dir)` trains a byte-pair-encoding tokenizer of a few hundred
tokens with the `tokenizers` package (deterministically: the same files every run; the one
test configuration with a continuing-subword prefix is trained by the same algorithm
written here, as the package's trainer is not reproducible in that mode) and
writes `tokenizer.json` and `tokenizer_config.json` into `out_dir`, laid out as the
family's real checkpoints lay them out: the same normalizer, pre-tokenizer, BPE options,
post-processor and decoder, the family's special and added tokens (with their flags), the
bos/eos/pad tokens of its tokenizer_config.json and its chat template
(tests/data/templates/). No model hub is involved.

Families (FAMILIES): llama3, qwen2, qwen3, deepseek3, glm45, glm5, gemma3. The test-only
configurations in TEST_CONFIGS cover the rest of what src/tokenizer/hf_*.cc reads
(Metaspace, Digits, Split behaviors and invert, Lowercase/Strip/Prepend, byte fallback with
an unknown token, continuing_subword_prefix / end_of_word_suffix, added tokens with
lstrip / rstrip / single_word / normalized).

Used by tools/make_hf_tokenizer_golden.py (the C++ tests' data) and by the fixture
generator of whole Hugging Face checkpoints.

    from hf_tokenizers import train_tokenizer
    info = train_tokenizer("qwen3", "/tmp/qwen3")   # {"bos_token_id": ..., "eos_token_ids": [...], ...}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable

from tokenizers import Tokenizer, models, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "tests", "data", "templates")

# ----------------------------------------------------------------------------------------
# Training text: fixed, multilingual, with code, digits and whitespace runs, so that the
# merges cover the kinds of text the tests encode.
# ----------------------------------------------------------------------------------------

_CORPUS_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! Hello, world. hello there, how are you doing today?",
    "I can't believe it's not butter; they'll say we've done what I'd do.",
    "Tokenizers split text into pieces; byte-pair encoding merges frequent pairs.",
    "In 2024 the model read 1234567 tokens at 3.14 tokens per second, or 42%.",
    "def encode(text):\n    return [ord(c) for c in text]  # simple\n",
    "for (int i = 0; i < n; ++i) { sum += values[i] * 2; }",
    "    indented line\n\tTabbed line\r\nWindows line\n\n\nthree newlines",
    "東京は日本の首都です。京都は古い都です。",
    "中文分词是一个有趣的问题，我们今天讨论它。",
    "한국어 문장도 조금 있습니다.",
    "Ça va? Größe: 12.5 cm, naïve café, crème brûlée.",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم",
    "emoji: 😀 😃 🎉 👍🏽 ❤️ 🇺🇸",
    "JSON: {\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "https://example.com/path?q=1&r=two#frag e-mail: someone@example.com",
    "state-of-the-art well-known long-term, up-to-date; re-enter the matrix.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 10000 3.14159 2,718",
    "UPPER CASE AND lower case And Mixed Case Words",
    "yesterday I read a book; tomorrow I will read another one.",
    "    def f(x):\n        if x > 0:\n            return x\n        return -x\n",
]


def corpus() -> list[str]:
    """The training text: every line in a few spellings (deterministic)."""
    lines = []
    for i, line in enumerate(_CORPUS_LINES):
        lines.append(line)
        lines.append(line.lower())
        lines.append(" " + line + " " + str(i))
    return lines * 4


# ----------------------------------------------------------------------------------------
# Pipeline pieces, as tokenizer.json spells them.
# ----------------------------------------------------------------------------------------

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEEPSEEK3_REGEXES = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"
    r" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]


def split(regex: str | None = None, string: str | None = None, behavior: str = "Isolated",
          invert: bool = False) -> dict:
    pattern = {"Regex": regex} if regex is not None else {"String": string}
    return {"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}


def byte_level(add_prefix_space=False, trim_offsets=True, use_regex=False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def sequence_pre(*steps) -> dict:
    return {"type": "Sequence", "pretokenizers": list(steps)}


def template(prefix: list[str], suffix: list[str], ids: dict[str, int]) -> dict:
    """TemplateProcessing adding `prefix` tokens before and `suffix` tokens after $A."""
    single = [{"SpecialToken": {"id": t, "type_id": 0}} for t in prefix]
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    single += [{"SpecialToken": {"id": t, "type_id": 0}} for t in suffix]
    pair = list(single) + [{"Sequence": {"id": "B", "type_id": 1}}]
    special = {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in prefix + suffix}
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": special}


BYTE_LEVEL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                      "use_regex": True}
SPM_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
]}


@dataclass
class Added:
    """One added token (tokenizer.json `added_tokens` entry)."""
    content: str
    special: bool = True
    normalized: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


@dataclass
class Config:
    """How one family's tokenizer.json and tokenizer_config.json look."""
    vocab_size: int                      # trained model vocab, before the tokens at the end
    normalizer: dict | None
    pre_tokenizer: dict | None
    decoder: dict | None
    byte_level: bool                     # byte-level alphabet (else characters + <0xXX>)
    front: list[Added]                   # added tokens at ids 0.. (before the trained ones)
    back: list[Added]                    # added tokens after the trained vocab
    post_processor: Callable[[dict[str, int]], dict | None] = lambda ids: None
    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    add_bos_token: bool | None = None    # tokenizer_config.json keys (absent when None)
    add_eos_token: bool | None = None
    generation_eos: list[str] = field(default_factory=list)  # generation_config eos_token_id
    template: str | None = None          # tests/data/templates/<name>
    tokenizer_class: str = "PreTrainedTokenizerFast"
    bpe: dict = field(default_factory=dict)  # model options over the defaults
    merges_as_pairs: bool = True         # merges as [a, b] (newer) or "a b" (older files)
    byte_tokens: bool = False            # <0x00>..<0xFF> in the model vocab (byte fallback)
    limit_alphabet: int | None = None


def _reserved(n: int) -> list[Added]:
    return [Added(f"<|reserved_special_token_{i}|>") for i in range(n)]


_QWEN_BACK = [
    Added("<|endoftext|>"), Added("<|im_start|>"), Added("<|im_end|>"),
    Added("<|object_ref_start|>"), Added("<|object_ref_end|>"), Added("<|box_start|>"),
    Added("<|box_end|>"), Added("<|quad_start|>"), Added("<|quad_end|>"),
    Added("<|vision_start|>"), Added("<|vision_end|>"), Added("<|vision_pad|>"),
    Added("<|image_pad|>"), Added("<|video_pad|>"),
    Added("<tool_call>", special=False), Added("</tool_call>", special=False),
    Added("<|fim_prefix|>", special=False), Added("<|fim_middle|>", special=False),
    Added("<|fim_suffix|>", special=False), Added("<|fim_pad|>", special=False),
    Added("<|repo_name|>", special=False), Added("<|file_sep|>", special=False),
]
_QWEN3_EXTRA = [
    Added("<tool_response>", special=False), Added("</tool_response>", special=False),
    Added("<think>", special=False), Added("</think>", special=False),
]
_GLM_BACK = [
    Added("<|endoftext|>"), Added("[MASK]"), Added("[gMASK]"), Added("[sMASK]"), Added("<sop>"),
    Added("<eop>"), Added("<|system|>"), Added("<|user|>"), Added("<|assistant|>"),
    Added("<|observation|>"), Added("<|begin_of_image|>"), Added("<|end_of_image|>"),
    Added("<|begin_of_video|>"), Added("<|end_of_video|>"),
    Added("<think>", special=False), Added("</think>", special=False),
    Added("<tool_call>", special=False), Added("</tool_call>", special=False),
    Added("<tool_response>", special=False), Added("</tool_response>", special=False),
    Added("<arg_key>", special=False), Added("</arg_key>", special=False),
    Added("<arg_value>", special=False), Added("</arg_value>", special=False),
    Added("/nothink", special=False),
]
_DEEPSEEK_FRONT = [
    Added("<\uff5cbegin\u2581of\u2581sentence\uff5c>"),
    Added("<\uff5cend\u2581of\u2581sentence\uff5c>"),
    Added("<\uff5c\u2581pad\u2581\uff5c>"),
]
_DEEPSEEK_BACK = [
    Added("<\uff5cfim\u2581hole\uff5c>", special=False),
    Added("<\uff5cfim\u2581begin\uff5c>", special=False),
    Added("<\uff5cfim\u2581end\uff5c>", special=False),
    Added("<\uff5cUser\uff5c>", special=False), Added("<\uff5cAssistant\uff5c>", special=False),
    Added("<think>", special=False), Added("</think>", special=False),
    Added("<\uff5ctool\u2581calls\u2581begin\uff5c>", special=False),
    Added("<\uff5ctool\u2581calls\u2581end\uff5c>", special=False),
    Added("<\uff5ctool\u2581call\u2581begin\uff5c>", special=False),
    Added("<\uff5ctool\u2581call\u2581end\uff5c>", special=False),
    Added("<\uff5ctool\u2581sep\uff5c>", special=False),
]
_GEMMA_FRONT = [
    Added("<pad>"), Added("<eos>"), Added("<bos>"), Added("<unk>"), Added("<mask>", special=False),
    Added("[multimodal]"), Added("<start_of_turn>"), Added("<end_of_turn>"),
    Added("<start_of_image>"), Added("<end_of_image>"),
]


def _llama3_post(ids):
    return {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        template(["<|begin_of_text|>"], [], ids)]}


def _qwen_post(ids):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
            "use_regex": False}


FAMILIES: dict[str, Config] = {
    "llama3": Config(
        vocab_size=480, normalizer=None,
        pre_tokenizer=sequence_pre(split(LLAMA3_REGEX), byte_level()),
        decoder=BYTE_LEVEL_DECODER, byte_level=True, front=[],
        back=[Added("<|begin_of_text|>"), Added("<|end_of_text|>")] + _reserved(2) + [
            Added("<|finetune_right_pad_id|>"), Added("<|step_id|>"),
            Added("<|start_header_id|>"), Added("<|end_header_id|>"), Added("<|eom_id|>"),
            Added("<|eot_id|>"), Added("<|python_tag|>")],
        post_processor=_llama3_post, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
        generation_eos=["<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"], template="llama3.jinja",
        bpe={"ignore_merges": True}, merges_as_pairs=False),
    "qwen2": Config(
        vocab_size=460, normalizer={"type": "NFC"},
        pre_tokenizer=sequence_pre(split(QWEN2_REGEX), byte_level(trim_offsets=False)),
        decoder={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                 "use_regex": False},
        byte_level=True, front=[], back=list(_QWEN_BACK), post_processor=_qwen_post,
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
        generation_eos=["<|im_end|>", "<|endoftext|>"], template="qwen2.5.jinja",
        tokenizer_class="Qwen2Tokenizer",
        bpe={"continuing_subword_prefix": "", "end_of_word_suffix": ""}),
    "qwen3": Config(
        vocab_size=500, normalizer={"type": "NFC"},
        pre_tokenizer=sequence_pre(split(QWEN2_REGEX), byte_level(trim_offsets=False)),
        decoder={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                 "use_regex": False},
        byte_level=True, front=[], back=_QWEN_BACK + _QWEN3_EXTRA, post_processor=_qwen_post,
        eos_token="<|im_end|>", pad_token="<|endoftext|>",
        generation_eos=["<|im_end|>", "<|endoftext|>"], template="qwen3.jinja",
        tokenizer_class="Qwen2Tokenizer",
        bpe={"continuing_subword_prefix": "", "end_of_word_suffix": ""}),
    "deepseek3": Config(
        vocab_size=520, normalizer={"type": "Sequence", "normalizers": []},
        pre_tokenizer=sequence_pre(*[split(r) for r in DEEPSEEK3_REGEXES], byte_level()),
        decoder=BYTE_LEVEL_DECODER, byte_level=True, front=list(_DEEPSEEK_FRONT),
        back=list(_DEEPSEEK_BACK),
        post_processor=lambda ids: template(["<\uff5cbegin\u2581of\u2581sentence\uff5c>"], [], ids),
        bos_token="<\uff5cbegin\u2581of\u2581sentence\uff5c>",
        eos_token="<\uff5cend\u2581of\u2581sentence\uff5c>",
        pad_token="<\uff5cend\u2581of\u2581sentence\uff5c>", add_bos_token=True,
        add_eos_token=False, generation_eos=["<\uff5cend\u2581of\u2581sentence\uff5c>"],
        template="deepseek-v3.1.jinja", tokenizer_class="LlamaTokenizerFast"),
    "glm45": Config(
        vocab_size=470, normalizer=None,
        pre_tokenizer=sequence_pre(split(LLAMA3_REGEX), byte_level()),
        decoder=BYTE_LEVEL_DECODER, byte_level=True, front=[], back=list(_GLM_BACK),
        post_processor=_qwen_post, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        generation_eos=["<|endoftext|>", "<|user|>", "<|observation|>"], template="glm45.jinja"),
    # GLM-5 (glm-dsa) keeps GLM-4.5's tokenizer; its chat template is GLM-4.7's.
    "glm5": Config(
        vocab_size=490, normalizer=None,
        pre_tokenizer=sequence_pre(split(LLAMA3_REGEX), byte_level()),
        decoder=BYTE_LEVEL_DECODER, byte_level=True, front=[], back=list(_GLM_BACK),
        post_processor=_qwen_post, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        generation_eos=["<|endoftext|>", "<|user|>", "<|observation|>"],
        template="glm47-flash.jinja"),
    "gemma3": Config(
        vocab_size=560,
        normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        pre_tokenizer=None, decoder=SPM_DECODER, byte_level=False, front=list(_GEMMA_FRONT),
        back=[], post_processor=lambda ids: template(["<bos>"], [], ids), bos_token="<bos>",
        eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", add_bos_token=True,
        add_eos_token=False, generation_eos=["<eos>", "<end_of_turn>"], template="gemma3.jinja",
        tokenizer_class="GemmaTokenizer",
        bpe={"byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>"},
        byte_tokens=True, limit_alphabet=120),
}

TEST_CONFIGS: dict[str, Config] = {
    # Llama-2 / Mistral as converted with legacy=True: Prepend + Replace, byte fallback,
    # a Strip decoder.
    "t_spm_legacy": Config(
        vocab_size=420,
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        pre_tokenizer=None,
        decoder={"type": "Sequence", "decoders": SPM_DECODER["decoders"] + [
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        byte_level=False, front=[Added("<unk>"), Added("<s>"), Added("</s>")], back=[],
        post_processor=lambda ids: template(["<s>"], [], ids), bos_token="<s>",
        eos_token="</s>", unk_token="<unk>", tokenizer_class="LlamaTokenizerFast",
        bpe={"byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>"},
        byte_tokens=True, limit_alphabet=90, merges_as_pairs=False),
    # The Metaspace pre-tokenizer (prepend_scheme "first", no split) and decoder.
    "t_metaspace": Config(
        vocab_size=400, normalizer=None,
        pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                       "split": False},
        decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                 "split": False},
        byte_level=False, front=[Added("<unk>"), Added("<s>"), Added("</s>")],
        back=[Added("<|user|>"), Added("<|assistant|>", lstrip=True, rstrip=True)],
        post_processor=lambda ids: template(["<s>"], ["</s>"], ids), bos_token="<s>",
        eos_token="</s>", unk_token="<unk>",
        bpe={"byte_fallback": True, "unk_token": "<unk>"}, byte_tokens=True, limit_alphabet=100),
    # Metaspace with split and prepend_scheme "always" after Digits, a Lowercase + NFC
    # normalizer; unknown characters become <unk> (no byte fallback, fuse_unk off).
    "t_metaspace_split": Config(
        vocab_size=380,
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
        pre_tokenizer=sequence_pre(
            {"type": "Digits", "individual_digits": True},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
             "split": True}),
        decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                 "split": True},
        byte_level=False, front=[Added("<unk>"), Added("<s>"), Added("</s>")],
        back=[Added("Yesterday", special=False, normalized=True),
              Added("<mask>", special=True, lstrip=True),
              Added("ony", special=False, single_word=True)],
        post_processor=lambda ids: None, eos_token="</s>", unk_token="<unk>",
        bpe={"unk_token": "<unk>", "fuse_unk": False}, limit_alphabet=80),
    # Word-level BPE with a continuing-subword prefix and an end-of-word suffix, every Split
    # behavior, invert, a Strip and a regex Replace normalizer, Digits (contiguous), and the
    # BPEDecoder.
    "t_bpe_features": Config(
        vocab_size=420,
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}]},
        pre_tokenizer=sequence_pre(
            split(string="-", behavior="MergedWithPrevious"),
            split(regex="[,;]", behavior="Removed"),
            split(regex=r"\s", behavior="MergedWithNext"),
            split(regex=r"\p{P}", behavior="Contiguous"),
            split(regex=r"[^\p{L}\s]+", behavior="Isolated", invert=True),
            {"type": "Digits", "individual_digits": False}),
        decoder={"type": "BPEDecoder", "suffix": "</w>"}, byte_level=False,
        front=[Added("[UNK]"), Added("[CLS]"), Added("[SEP]")],
        back=[Added("[MASK]", lstrip=True, rstrip=True),
              Added("<sw>", special=False, single_word=True),
              Added("yesterday", special=False, normalized=True)],
        post_processor=lambda ids: template(["[CLS]"], ["[SEP]"], ids), bos_token="[CLS]",
        eos_token="[SEP]", unk_token="[UNK]",
        bpe={"unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "end_of_word_suffix": "</w>"},
        limit_alphabet=70),
    # GPT-2: ByteLevel with add_prefix_space and its own regex, a Digits split before it.
    "t_gpt2": Config(
        vocab_size=450, normalizer=None,
        pre_tokenizer=sequence_pre({"type": "Digits", "individual_digits": False},
                                   byte_level(add_prefix_space=True, use_regex=True)),
        decoder=BYTE_LEVEL_DECODER, byte_level=True, front=[],
        back=[Added("<|endoftext|>"), Added(" <|pad|>", special=False)],
        post_processor=lambda ids: template([], ["<|endoftext|>"], ids),
        eos_token="<|endoftext|>", bos_token="<|endoftext|>"),
}

ALL_CONFIGS = {**FAMILIES, **TEST_CONFIGS}


def _byte_level_alphabet() -> list[str]:
    from tokenizers import pre_tokenizers
    return sorted(pre_tokenizers.ByteLevel.alphabet())


def _alphabet(cfg: Config, tok: Tokenizer) -> list[str]:
    """The corpus' characters after normalization and pre-tokenization, most frequent first."""
    counts: dict[str, int] = {}
    for line in corpus():
        text = tok.normalizer.normalize_str(line) if tok.normalizer else line
        pieces = tok.pre_tokenizer.pre_tokenize_str(text) if tok.pre_tokenizer else [(text, None)]
        for piece, _ in pieces:
            for c in piece:
                counts[c] = counts.get(c, 0) + 1
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], ord(kv[0])))]


def _train_with_affixes(cfg: Config, tok: Tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """BPE training with a continuing-subword prefix / end-of-word suffix, done here.

    The package's trainer adds the prefixed alphabet in hash order and breaks ties between
    equally frequent pairs by id, so its output changes from run to run in this mode. This
    is the same algorithm (most frequent adjacent pair first), ties broken by the pair's
    text, which makes it reproducible.
    """
    prefix = cfg.bpe.get("continuing_subword_prefix") or ""
    suffix = cfg.bpe.get("end_of_word_suffix") or ""
    alphabet = set(_alphabet(cfg, tok)[:cfg.limit_alphabet or None])
    words: dict[tuple[str, ...], int] = {}
    for line in corpus():
        text = tok.normalizer.normalize_str(line) if tok.normalizer else line
        for piece, _ in tok.pre_tokenizer.pre_tokenize_str(text):
            if not all(c in alphabet for c in piece):
                continue
            symbols = tuple((prefix if i else "") + c + (suffix if i == len(piece) - 1 else "")
                            for i, c in enumerate(piece))
            words[symbols] = words.get(symbols, 0) + 1
    vocab: dict[str, int] = {}
    for t in [cfg.bpe["unk_token"]] if cfg.bpe.get("unk_token") else []:
        vocab[t] = len(vocab)
    for symbols in sorted({s for w in words for s in w}):
        vocab.setdefault(symbols, len(vocab))
    merges: list[tuple[str, str]] = []
    while len(vocab) < cfg.vocab_size:
        pairs: dict[tuple[str, str], int] = {}
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        best = min((p for p in pairs if pairs[p] >= 2), key=lambda p: (-pairs[p], p), default=None)
        if best is None:
            break
        a, b = best
        merged = a + b[len(prefix):] if b.startswith(prefix) else a + b
        merges.append(best)
        vocab.setdefault(merged, len(vocab))
        new_words: dict[tuple[str, ...], int] = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    return vocab, merges


def _train(cfg: Config) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Trained vocab (token -> id from 0) and merges, in the configuration's pipeline."""
    tok = Tokenizer(models.BPE(**{k: v for k, v in cfg.bpe.items()
                                  if k in ("unk_token", "continuing_subword_prefix",
                                           "end_of_word_suffix")}))
    pipeline = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": cfg.normalizer, "pre_tokenizer": cfg.pre_tokenizer,
                "post_processor": None, "decoder": None,
                "model": json.loads(tok.to_str())["model"]}
    tok = Tokenizer.from_str(json.dumps(pipeline))
    if cfg.bpe.get("continuing_subword_prefix") or cfg.bpe.get("end_of_word_suffix"):
        return _train_with_affixes(cfg, tok)
    kwargs = dict(vocab_size=cfg.vocab_size, min_frequency=2, show_progress=False,
                  special_tokens=[])
    if cfg.byte_level:
        kwargs["initial_alphabet"] = _byte_level_alphabet()
    if cfg.limit_alphabet is not None:
        # The trainer breaks ties between equally frequent characters in hash order; an
        # explicit alphabet (most frequent first, then by code point) keeps runs identical.
        alphabet = _alphabet(cfg, tok)[:cfg.limit_alphabet]
        kwargs["initial_alphabet"] = alphabet
        kwargs["limit_alphabet"] = len(alphabet)
    if cfg.bpe.get("unk_token"):
        kwargs["special_tokens"] = [cfg.bpe["unk_token"]]
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(**kwargs))
    model = json.loads(tok.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1]))
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return vocab, merges


def build(family: str) -> tuple[str, str, dict]:
    """(tokenizer.json text, tokenizer_config.json text, info) for `family`."""
    cfg = ALL_CONFIGS[family]
    trained, merges = _train(cfg)

    # Final id layout: front added tokens, byte tokens, the trained vocab, back added tokens.
    vocab: dict[str, int] = {}
    for a in cfg.front:
        vocab.setdefault(a.content, len(vocab))
    if cfg.byte_tokens:
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    for token in trained:
        vocab.setdefault(token, len(vocab))
    ids = dict(vocab)
    next_id = len(vocab)
    for a in cfg.back:
        ids[a.content] = next_id
        next_id += 1

    added = [{"id": ids[a.content], "content": a.content, "single_word": a.single_word,
              "lstrip": a.lstrip, "rstrip": a.rstrip, "normalized": a.normalized,
              "special": a.special} for a in cfg.front + cfg.back]
    model = {"type": "BPE", "dropout": None, "unk_token": None,
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
             "byte_fallback": False, "ignore_merges": False}
    model.update(cfg.bpe)
    model["vocab"] = vocab
    model["merges"] = ([list(m) for m in merges] if cfg.merges_as_pairs
                       else [f"{a} {b}" for a, b in merges])
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": cfg.normalizer, "pre_tokenizer": cfg.pre_tokenizer,
           "post_processor": cfg.post_processor(ids), "decoder": cfg.decoder, "model": model}
    tokenizer_json = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    Tokenizer.from_str(tokenizer_json)  # the package must accept what we wrote

    config: dict = {}
    if cfg.add_bos_token is not None:
        config["add_bos_token"] = cfg.add_bos_token
    if cfg.add_eos_token is not None:
        config["add_eos_token"] = cfg.add_eos_token
    config["added_tokens_decoder"] = {
        str(e["id"]): {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                          "single_word", "special")} for e in added}
    config["bos_token"] = cfg.bos_token
    config["eos_token"] = cfg.eos_token
    if cfg.pad_token is not None:
        config["pad_token"] = cfg.pad_token
    if cfg.unk_token is not None:
        config["unk_token"] = cfg.unk_token
    if cfg.template is not None:
        with open(os.path.join(TEMPLATES, cfg.template), encoding="utf-8") as f:
            config["chat_template"] = f.read()
    config["clean_up_tokenization_spaces"] = False
    config["model_max_length"] = 131072
    config["tokenizer_class"] = cfg.tokenizer_class
    config_json = json.dumps(config, ensure_ascii=False, indent=2) + "\n"

    def tid(t):
        return ids[t] if t is not None else None
    info = {"vocab_size": next_id, "bos_token_id": tid(cfg.bos_token),
            "eos_token_id": tid(cfg.eos_token), "pad_token_id": tid(cfg.pad_token),
            "eos_token_ids": [ids[t] for t in cfg.generation_eos]}
    return tokenizer_json, config_json, info


def train_tokenizer(family: str, out_dir) -> dict:
    """Writes tokenizer.json and tokenizer_config.json for `family` into `out_dir`.

    Returns {"vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "eos_token_ids"}
    (eos_token_ids: what the family's generation_config.json lists as eos_token_id); ids
    are None where the family has no such token.
    """
    if family not in ALL_CONFIGS:
        raise ValueError(f"unknown tokenizer family {family!r} (known: {', '.join(ALL_CONFIGS)})")
    tokenizer_json, config_json, info = build(family)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tokenizer_json)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        f.write(config_json)
    return info
