#!/usr/bin/env python3
"""Writes the test data of src/tokenizer/hf_tokenizer_golden_test.cc.

For every configuration of tools/hf_tokenizers.py (the seven model families and the
test-only ones) this trains the tokenizer and writes, under tests/data/hf_tokenizers/<name>/:
  tokenizer.json, tokenizer_config.json   what train_tokenizer writes
  golden.json   for each test string, what the Python `tokenizers` package (0.23) gives:
      ids            encode(text, add_special_tokens=False).ids
      ids_special    encode(text, add_special_tokens=True).ids
      ids_literal    the same as ids with encode_special_tokens = True (special tokens'
                     spellings tokenized as text: Tokenizer::Encode's parse_special=false)
      decoded        decode(ids_special, skip_special_tokens=True)
      decoded_special decode(ids_special, skip_special_tokens=False)
      round_trips    decode(ids, skip_special_tokens=False) == text
    "malformed": byte strings that are not UTF-8 (hex) and the ids of their
      bytes.decode("utf-8", "replace"), which is how the C++ side reads such input;
    "info": train_tokenizer's ids (bos, eos, pad, the generation eos list).

Deterministic: a second run writes the same bytes (--check compares instead of writing).

Usage:  python3 tools/make_hf_tokenizer_golden.py [--check] [name ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

OUT = os.path.join(hf_tokenizers.ROOT, "tests", "data", "hf_tokenizers")

STRINGS = [
    "", " ", "  ", "   ", "a", "A", ".", "\n", "\n\n", "\t", "\r\n", " \n ", "\x00", "\x7f",
    "é", "e\u0301", "Å", "A\u030a", "\u212b", "\u1e9b\u0323", "ﬁ", "\u00df", "İstanbul",
    "ΣΑΣ σας", "中", "😀", "👍🏽", "🇺🇸", "\u2581", "\u2581\u2581x", "Ġ", "\u200b", "\ufeff",
    "\U0010ffff", "\ue000",
    "Hello world", "Hello, world!", "hello world", "HELLO WORLD", " Hello world",
    "Hello world ", "Hello  world", "Hello\tworld\n", "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter!", "They'll say we've done what I'd do, but you're right.",
    "DON'T SHOUT, IT'S RUDE. WE'RE FINE. I'M HERE.", "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll", "e-mail: someone@example.com", "https://example.com/path?q=1&r=two#frag",
    "state-of-the-art well-known", "What?! No way... really?!", "a ' b", "x 'm y 're z",
    "“smart quotes” and ‘single’ — dash – test",
    "1", "12", "123", "1234", "12345", "123456789", "3.14159", "1,000,000", "2024-01-15",
    "v1.2.3", "0x1F", "٣٤٥", "①②③", "Ⅻ", "½",
    "東京は日本の首都です。", "中文分词是一个有趣的问题。", "한국어 문장", "カタカナとひらがな",
    "Привет, мир!", "مرحبا بالعالم", "Ça va? Größe: 12.5 cm", "naïve café crème brûlée",
    "emoji: 😀 😃 🎉 👍🏽 ❤️", "mixed中文and English混合",
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) {\n\tsum += i;\n}",
    "    indented\n        more\n", "\n\n\nthree newlines", "trailing spaces   ", "   leading",
    "a\r\nb\rc\nd", "tabs\t\tand  spaces", "x" * 40, " " * 17, "\n" * 9, "ab" * 30,
    "JSON: {\"key\": [1, 2, 3], \"b\": null}", "<html><body>Hi</body></html>",
    "yesterday Yesterday YESTERDAY", "tomorrow I read", "Anthony is only lonely",
    "UPPER lower MiXeD", "--double--dash-", "a,b;c, d ; e", "...!!!???",
    "<s>", "</s>", "<unk>", "<0x41>", "[UNK]", "<|endoftext|>", "<mask>", "[MASK]",
    "the <mask> and the<mask>token", "one [MASK] two[MASK]three [MASK] four",
    "<sw> <sw>x x<sw> (<sw>)", "ony Tony ony. ony", " <|pad|> x <|pad|>",
]

# Strings built from each configuration's own added tokens.
def family_strings(cfg: hf_tokenizers.Config) -> list[str]:
    added = [a.content for a in cfg.front + cfg.back]
    out = []
    for t in added[:12]:
        out += [t, f"Hello{t}world", f" {t} ", f"{t}{t}", f"a {t}\n b"]
    if len(added) >= 3:
        out.append(" ".join(added))
        out.append("".join(added))
        out.append(f"{added[0]}text{added[-1]} more {added[1]}")
    # A spelling cut short, and one with an inner prefix of another token.
    for t in added[:4]:
        if len(t) > 2:
            out += [t[:-1], t[1:], t[:-1] + t]
    return out


MALFORMED = [
    b"\x80", b"a\xe4\xb8b", b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf0\x9f\x98",
    b"ok \xf4\x90\x80\x80 end", b"\xe2\x96", b"caf\xe9", b"\xf0\x80\x80\x80x",
    b"Hello \xc3 world", b"\xe6\x97\xa5\xe6\x9c",
]


def golden(name: str, tokenizer_json: str, info: dict) -> str:
    tok = Tokenizer.from_str(tokenizer_json)
    cfg = hf_tokenizers.ALL_CONFIGS[name]
    strings = list(dict.fromkeys(STRINGS + family_strings(cfg)))
    rows = []
    for s in strings:
        tok.encode_special_tokens = False
        ids = tok.encode(s, add_special_tokens=False).ids
        ids_special = tok.encode(s, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        ids_literal = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        rows.append({
            "text": s, "ids": ids, "ids_special": ids_special, "ids_literal": ids_literal,
            "decoded": tok.decode(ids_special, skip_special_tokens=True),
            "decoded_special": tok.decode(ids_special, skip_special_tokens=False),
            "round_trips": tok.decode(ids, skip_special_tokens=False) == s,
        })
    malformed = [{"hex": b.hex(), "ids": tok.encode(b.decode("utf-8", "replace"),
                                                    add_special_tokens=False).ids}
                 for b in MALFORMED]
    doc = {"name": name, "info": info, "strings": rows, "malformed": malformed}
    return json.dumps(doc, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the files instead")
    parser.add_argument("names", nargs="*", help="configurations (default: all)")
    args = parser.parse_args()
    names = args.names or list(hf_tokenizers.ALL_CONFIGS)
    stale = []
    for name in names:
        tokenizer_json, config_json, info = hf_tokenizers.build(name)
        files = {"tokenizer.json": tokenizer_json, "tokenizer_config.json": config_json,
                 "golden.json": golden(name, tokenizer_json, info)}
        folder = os.path.join(OUT, name)
        for file, text in files.items():
            path = os.path.join(folder, file)
            if args.check:
                try:
                    with open(path, encoding="utf-8") as f:
                        same = f.read() == text
                except OSError:
                    same = False
                if not same:
                    stale.append(path)
                continue
            os.makedirs(folder, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    for path in stale:
        print(f"stale: {path}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
