"""A small stand-in for tools/hf_tokenizers.py (`train_tokenizer(family, out_dir)`), used by
tools/make_hf_fixtures.py only while that module is not in the tree.

Trains a byte-level BPE (the `tokenizers` package) on a short fixed corpus with the
family's own pre-tokenizer (the Split regexes of its tokenizer.json, ByteLevel, Qwen's
NFC normalizer; Gemma 3: Replace(" " -> "▁") and byte fallback), adds the family's special
tokens after the learned vocabulary, and writes tokenizer.json and tokenizer_config.json
(with the family's chat template from tests/data/templates/). Deterministic: the corpus
and the trainer settings are fixed, and the trainer breaks ties by token order.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

TEMPLATES = Path(__file__).resolve().parent.parent / "tests" / "data" / "templates"

# The Split regexes of each family's tokenizer.json (Llama 3 and GLM-4.5/5 share one:
# digits in runs of up to three; Qwen2/3 split every digit; DeepSeek-V3 has three Splits).
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK3_REGEXES = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"
    r" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

# Per family: the Split regexes (None: Gemma's SentencePiece-style BPE), NFC or not, the
# special tokens in id order after the learned vocabulary, the roles of some of them, the
# tokenizer_config flags and the chat template file.
FAMILIES: dict[str, dict] = {
    "llama3": dict(
        regexes=(LLAMA3_REGEX,), nfc=False, ignore_merges=True,
        specials=["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                  "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"],
        bos="<|begin_of_text|>", eos="<|eot_id|>", pad=None, add_bos=True,
        tokenizer_class="PreTrainedTokenizerFast", template="llama3.jinja"),
    "qwen2": dict(
        regexes=(QWEN2_REGEX,), nfc=True,
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"],
        bos=None, eos="<|im_end|>", pad="<|endoftext|>", add_bos=False,
        tokenizer_class="Qwen2Tokenizer", template="qwen2.5.jinja"),
    "qwen3": dict(
        regexes=(QWEN2_REGEX,), nfc=True,
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>", "<think>", "</think>"],
        bos=None, eos="<|im_end|>", pad="<|endoftext|>", add_bos=False,
        tokenizer_class="Qwen2Tokenizer", template="qwen3.jinja"),
    "deepseek3": dict(
        regexes=DEEPSEEK3_REGEXES, nfc=False,
        specials=["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>",
                  "<｜Assistant｜>", "<think>", "</think>", "<｜tool▁calls▁begin｜>",
                  "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                  "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
                  "<｜tool▁output▁end｜>", "<｜tool▁sep｜>"],
        bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", pad="<｜▁pad▁｜>", add_bos=True,
        tokenizer_class="LlamaTokenizerFast", template="deepseek-v3.1.jinja"),
    "glm45": dict(
        regexes=(LLAMA3_REGEX,), nfc=False,
        specials=["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                  "<|user|>", "<|assistant|>", "<|observation|>", "<|begin_of_image|>",
                  "<|end_of_image|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>",
                  "<arg_value>", "</arg_value>"],
        bos=None, eos="<|endoftext|>", pad="<|endoftext|>", add_bos=False,
        tokenizer_class="PreTrainedTokenizerFast", template="glm45.jinja"),
    "gemma3": dict(
        regexes=None, nfc=False,
        specials=["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"],
        bos="<bos>", eos="<eos>", pad="<pad>", unk="<unk>", add_bos=True,
        tokenizer_class="GemmaTokenizerFast", template="gemma3.jinja"),
}
FAMILIES["glm5"] = dict(FAMILIES["glm45"], template="glm47-flash.jinja")

CORPUS = """The quick brown fox jumps over the lazy dog. Hello world! This is a test of the
tiny model that Tandem loads from a Hugging Face checkpoint in its tests. It has a small
vocabulary, a few layers and random weights, so it says nothing useful, but every number
it makes can be checked. Once upon a time there was a little language model that liked
to read and write. What is your name? My name is Tandem. How are you today? I'm fine,
thank you; we've seen it, they'll say, you'd know. Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 2024
3.14159 12345678. Code: def main(): return 0 if x == 1 else print("hello")  # comment
The user asked for the weather in Paris, and the assistant called a tool to find it out.
我想在苹果工作。こんにちは世界。Привет, мир! Ünïcödé café naïve 🚀 ✅
"""


def _pre_tokenizer(regexes: tuple[str, ...]):
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in regexes]
    return pre_tokenizers.Sequence(splits + [pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                       trim_offsets=False,
                                                                       use_regex=False)])


def _byte_level(fam: dict, vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=fam.get("ignore_merges", False)))
    if fam["nfc"]:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer(fam["regexes"])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    return tok


def _gemma(fam: dict, vocab_size: int) -> dict:
    """Gemma 3's layout: specials 0-3, then <0x00>..<0xFF>, then the pieces ("▁" for a
    space), BPE with byte fallback; the learned vocabulary is renumbered after the bytes."""
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    # Trained on words (SentencePiece splits at whitespace), served without a pre-tokenizer.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  special_tokens=[])
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    j = json.loads(tok.to_str())
    learned = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab: dict[str, int] = {}
    for t in fam["specials"][:4] + [f"<0x{b:02X}>" for b in range(256)]:
        vocab[t] = len(vocab)
    for t, _ in learned:
        if t not in vocab:
            vocab[t] = len(vocab)
    j["model"].update(vocab=vocab, byte_fallback=True, fuse_unk=True, unk_token="<unk>")
    j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    j["added_tokens"] = []
    for t in fam["specials"][4:]:
        vocab[t] = len(vocab)
    return j


# Reasoning and tool-call markup: added tokens that are not special in the published
# Qwen3 / GLM-4.5 tokenizers, so skip_special_tokens keeps them in the text the output
# parsers read.
MARKUP = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
          "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}


def train_tokenizer(family: str, out_dir: Path, vocab_size: int = 400) -> None:
    """Writes out_dir/tokenizer.json and out_dir/tokenizer_config.json for `family`."""
    fam = FAMILIES[family]
    out_dir = Path(out_dir)
    if fam["regexes"] is None:
        j = _gemma(fam, vocab_size)
        vocab = j["model"]["vocab"]
        ids = {t: vocab[t] for t in fam["specials"]}
    else:
        j = json.loads(_byte_level(fam, vocab_size).to_str())
        base = len(j["model"]["vocab"])
        ids = {t: base + k for k, t in enumerate(fam["specials"])}
    j["added_tokens"] = [{"id": ids[t], "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": t not in MARKUP}
                         for t in fam["specials"]]
    bos = fam["bos"]
    if fam["add_bos"] and fam["regexes"] is not None:
        j["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [ids[bos]], "tokens": [bos]}}}
    (out_dir / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False, indent=2) + "\n",
                                            encoding="utf-8")
    config = {
        "add_bos_token": fam["add_bos"],
        "add_eos_token": False,
        "added_tokens_decoder": {str(ids[t]): {"content": t, "lstrip": False, "normalized": False,
                                               "rstrip": False, "single_word": False,
                                               "special": t not in MARKUP}
                                 for t in fam["specials"]},
        "bos_token": bos,
        "chat_template": (TEMPLATES / fam["template"]).read_text(encoding="utf-8"),
        "clean_up_tokenization_spaces": False,
        "eos_token": fam["eos"],
        "model_max_length": 131072,
        "pad_token": fam["pad"],
        "tokenizer_class": fam["tokenizer_class"],
    }
    if "unk" in fam:
        config["unk_token"] = fam["unk"]
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
