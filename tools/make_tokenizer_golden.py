#!/usr/bin/env python3
"""Writes golden tokenizer data from llama.cpp (llama-cpp-python) for the C++ tests.

For each vocab GGUF this records, for ~270 strings (English, CJK, code, emoji,
whitespace runs, digits, accents, special-token spellings, single bytes, ...):
  ids          llama_tokenize(text, add_special=False, parse_special=False)
  ids_special  llama_tokenize(text, add_special=True,  parse_special=True)
  decoded          llama_detokenize(ids_special, remove_special=True,  unparse_special=False)
  decoded_special  llama_detokenize(ids_special, remove_special=False, unparse_special=True)
plus the vocab's BOS/EOS/EOT ids, add_bos/add_eos, the end-of-generation ids and
llama_token_to_piece for a sample of ids. The output is tests/data/tokenizer_golden_<name>.json,
read by src/tokenizer/tokenizer_test.cc.

Usage (after scripts/fetch_vocabs.sh and with the default model in models/default.gguf):
  python3 tools/make_tokenizer_golden.py            # all vocabs
  python3 tools/make_tokenizer_golden.py qwen2      # just one
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> model path relative to the repo root (the C++ test uses the same table).
VOCABS = {
    "gemma3": "models/default.gguf",
    "qwen2": "models/vocab/ggml-vocab-qwen2.gguf",
    "llama-bpe": "models/vocab/ggml-vocab-llama-bpe.gguf",
    "gpt-2": "models/vocab/ggml-vocab-gpt-2.gguf",
    "llama-spm": "models/vocab/ggml-vocab-llama-spm.gguf",
    "gpt-neox": "models/vocab/ggml-vocab-gpt-neox.gguf",
}

LONG_TEXT = (
    "The quick brown fox jumps over the lazy dog. " * 3
    + "Tokenizers split text into pieces; byte-pair encoding merges frequent pairs "
    "until no merge applies. 東京は日本の首都です。 Ça va? Größe: 12.5 cm, ~3,000 units. "
    "def f(x):\n    return x ** 2  # square\n\n\tTabbed line\r\nWindows line\n"
)

STRINGS = [
    # Empty and tiny.
    "", " ", "  ", "a", "A", "z", ".", ",", "'", "\"", "\n", "\t", "\r", "\r\n", "\x00", "\x01",
    "\x7f", "\x1b[0m", "é", "中", "😀", "▁", "Ġ", "Ċ", "ß", "ﬁ", "\u200b", "\ufeff",
    # English.
    "Hello world", "Hello, world!", "hello world", "HELLO WORLD", " Hello world",
    "Hello world ", "Hello  world", "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter!", "They'll say we've done what I'd do, but you're right.",
    "DON'T SHOUT, IT'S RUDE. WE'RE FINE. I'M HERE. YOU'VE GOT IT. HE'LL GO. SHE'D SAY.",
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "rock 'n' roll", "O'Neil's dog",
    "e-mail: someone@example.com", "https://example.com/path?q=1&r=two#frag",
    "Mr. Smith went to Washington, D.C., on Jan. 5th.", "What?! No way... really?!",
    "Is this a question ? Yes , it is . Wow !", "a ' b", "hello 's world", "x 'm y 're z 've",
    "state-of-the-art", "well‐known — dash – test", "“smart quotes” and ‘single’",
    "It costs $5.99 (or €5,49).", "100% sure; 50/50 chance", "#hashtag @mention",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor",
    LONG_TEXT,
    # Chinese / Japanese / Korean.
    "你好，世界！", "我爱北京天安门。", "中华人民共和国", "今天天气很好，我们去公园散步吧。",
    "机器学习和人工智能", "汉字和English混合", "繁體中文測試", "一二三四五六七八九十",
    "こんにちは世界", "東京は日本の首都です。", "カタカナとひらがな", "ｶﾀｶﾅ半角", "私は学生です",
    "日本語のテキスト、句読点。", "안녕하세요 세계", "한국어 텍스트입니다.",
    # Other scripts.
    "Привет, мир!", "Москва — столица России.", "مرحبا بالعالم", "שלום עולם",
    "नमस्ते दुनिया", "สวัสดีชาวโลก", "Γειά σου Κόσμε", "Ελληνικά κείμενα",
    "Xin chào thế giới", "Tiếng Việt có dấu", "Türkçe ğüşıöç", "Ἀρχιμήδης",
    "ᚠᛇᚻ᛫ᛒᛦᚦ", "ⲁⲃⲅ", "𐌰𐌱𐌲 gothic",
    # Accents and combining marks.
    "café", "naïve résumé", "Ångström", "Größe", "façade", "coöperate", "São Paulo",
    "e\u0301", "cafe\u0301", "n\u0303", "a\u0308\u0301", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
    "mañana", "Ærøskøbing", "ĳssel", "Dvořák", "Łódź", "Å Ä Ö å ä ö",
    # Digits.
    "0", "1", "12", "123", "1234", "12345", "1234567", "12345678901234567890",
    "3.14159", "1,000,000", "1 000 000", "-42", "+7", "0x1F", "0b1010", "1e10", "2.5e-3",
    "abc123def", "a1b2c3", "version 1.2.3", "2024-01-15", "12:30:45", "(555) 123-4567",
    "１２３４５", "٠١٢٣٤٥٦٧٨٩", "१२३", "x² + y² = z²", "½ ¾ ⅓", "Ⅻ Ⅳ", "①②③",
    "123abc", "abc 123 def 4567", "99 bottles", "3rd 4th 21st",
    # Whitespace runs.
    "   ", "    ", "        ", " " * 16, " " * 33, "\n\n", "\n\n\n", "\n" * 10, "\n" * 40,
    "\t\t", "\t\t\t\t", "\t" * 35, " \n", "\n ", " \n ", "\n \n", "a\n\nb", "a  b   c    d",
    "a\tb\t\tc", "line1\nline2\nline3", "line1\r\nline2\r\n", "trailing   ", "   leading",
    "  both  ", "mixed \t\n \t\n", "a \n\n b", "x\n\n\n\ny", "\u00a0nbsp", "a\u00a0b",
    "a\u3000b", "\u3000全角空格", "a\u2003b", "a\u2009b", "a\u0085b", "a\u2028b", "a\u202fb",
    "a\x0bb", "a\x0cb", "a\x1cb",
    # Code.
    "def hello():\n    print('Hello, world!')\n",
    "for (int i = 0; i < n; ++i) {\n  sum += a[i];\n}\n",
    "#include <stdio.h>\nint main(void) { return 0; }",
    "std::vector<std::string> v{\"a\", \"b\"};",
    "if x == 1:\n\tpass\nelif x != 2:\n\treturn None",
    "const f = (a, b) => a + b; // arrow",
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null}}',
    "<div class=\"main\"><p>Hello</p></div>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "$ ls -la | grep '^d' && echo done",
    "x = [i**2 for i in range(10) if i % 2 == 0]",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "a->b; c::d; e.f(); g[h] = i;",
    "/* comment */ // another\n# python comment",
    "regex: ^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\\.[a-zA-Z0-9-.]+$",
    "    indented code\n        more indented\n",
    "```python\nprint(1)\n```",
    "<?xml version=\"1.0\"?><root/>",
    "x+=1;y-=2;z*=3;w/=4;",
    "!!!", "???", "...", "---", "___", "***", "~~~", "```", "<<>>", "[[]]", "{{}}", "((()))",
    "\\n\\t\\\\", "@@@###$$$", "<>", "</>", "=>", "!=", "<=>", "&&||",
    # Emoji.
    "😀😃😄", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🇺🇸🇯🇵", "❤️", "🏳️‍🌈", "I ❤️ NY",
    "emoji 🎉 party 🥳!", "🤖 robots", "☕ coffee", "✅ done ❌ failed", "🔥🔥🔥",
    "🩵🫨", "a😀b", "😀 😀",
    # Special-token spellings (gemma, qwen, llama3, gpt-2, generic).
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]",
    "<start_of_turn>", "<end_of_turn>", "<start_of_turn>user\nHello<end_of_turn>\n",
    "<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\n",
    "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_image>", "<end_of_image>", "<unused0>", "<unused42>", "<unused6241>",
    "<table><tr><td>1</td></tr></table>", "<h1>Title</h1>", "<b>bold</b> <i>it</i>",
    "<s>", "</s>", "<s> hello </s>", "<|endoftext|>", "text<|endoftext|>more",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|im_start|>", "<|im_end|>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
    "<|reserved_special_token_0|>", "<|reserved_special_token_250|>",
    "<start_of_tur", "start_of_turn>", "<<bos>>", "<bos><bos>", "<eos>text<bos>",
    "< bos >", "<BOS>", "<|im_start", "|im_end|>", "<|endoftext|><|endoftext|>",
    "  <start_of_turn>  ", "\n<end_of_turn>\n", "a<mask>b", "x<unk>y",
    "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
]


def _silence_llama_logs() -> None:
    cb = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(
        lambda level, text, user_data: None)
    _silence_llama_logs.keep = cb  # keep the callback alive
    llama_cpp.llama_log_set(cb, ctypes.c_void_p())


def tokenize(vocab, data: bytes, add_special: bool, parse_special: bool) -> list[int]:
    n_max = len(data) + 8
    while True:
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n >= 0:
            return list(buf[:n])
        n_max = -n


def detokenize(vocab, ids: list[int], remove_special: bool, unparse_special: bool) -> bytes:
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, remove_special,
                                       unparse_special)
        if n >= 0:
            return buf.raw[:n]
        cap = -n + 1


def token_to_piece(vocab, token: int, special: bool) -> bytes:
    cap = 64
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, cap, 0, special)
        if n >= 0:
            return buf.raw[:n]
        cap = -n + 1


def as_text(data: bytes) -> str:
    text = data.decode("utf-8")  # golden strings must stay valid UTF-8
    return text


def make(name: str, rel_path: str) -> dict:
    path = os.path.join(ROOT, rel_path)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    cases = []
    seen = set()
    for text in STRINGS:
        if text in seen:
            continue
        seen.add(text)
        data = text.encode("utf-8")
        ids = tokenize(vocab, data, False, False)
        ids_special = tokenize(vocab, data, True, True)
        # Cross-check against the high-level API the brief names.
        assert ids == llm.tokenize(data, add_bos=False, special=False), text
        cases.append({
            "text": text,
            "ids": ids,
            "ids_special": ids_special,
            "decoded": as_text(detokenize(vocab, ids_special, True, False)),
            "decoded_special": as_text(detokenize(vocab, ids_special, False, True)),
        })

    sample = sorted(set(range(min(n_vocab, 300))) | set(range(0, n_vocab, 1999)) |
                    {i for c in cases for i in c["ids_special"]})
    pieces = [[i, token_to_piece(vocab, i, True).hex(), token_to_piece(vocab, i, False).hex()]
              for i in sample]
    eog = [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    return {
        "vocab": name,
        "model_path": rel_path,
        "generator": f"tools/make_tokenizer_golden.py, llama-cpp-python {llama_cpp.__version__}",
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eot": llama_cpp.llama_vocab_eot(vocab),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog_ids": eog,
        "cases": cases,
        "pieces": pieces,
    }


def main(argv: list[str]) -> int:
    _silence_llama_logs()
    names = argv[1:] or list(VOCABS)
    out_dir = os.path.join(ROOT, "tests", "data")
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        golden = make(name, VOCABS[name])
        out = os.path.join(out_dir, f"tokenizer_golden_{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            # One case per line: small diffs when the corpus changes.
            f.write("{\n")
            head = {k: v for k, v in golden.items() if k not in ("cases", "pieces")}
            for k, v in head.items():
                f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
            f.write('  "cases": [\n')
            f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in golden["cases"]))
            f.write('\n  ],\n  "pieces": [\n')
            f.write(",\n".join("    " + json.dumps(p) for p in golden["pieces"]))
            f.write("\n  ]\n}\n")
        json.load(open(out, encoding="utf-8"))  # sanity: valid JSON
        print(f"{out}: {len(golden['cases'])} strings, {len(golden['pieces'])} pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
