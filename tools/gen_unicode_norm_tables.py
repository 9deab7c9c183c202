#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_{decomposition,composition,case}_tables.cc from Python's unicodedata.

The tables are what src/tokenizer/unicode_normalization.cc needs for the Hugging Face
normalizers NFC / NFD and Lowercase:
  - the canonical decomposition of each code point that has one (one or two code points,
    applied recursively at run time; Hangul syllables are decomposed algorithmically),
  - the canonical combining class of each code point whose class is not 0 (as ranges),
  - the primary composites: (first, second) -> composite for every canonical
    decomposition of two code points whose composite survives NFC (this leaves out the
    composition exclusions, singletons and non-starter decompositions),
  - the full lowercase mapping of one code point (str.lower() of that code point alone,
    which is Rust's char::to_lowercase: UnicodeData plus the unconditional SpecialCasing
    entries; only U+0130 maps to two code points),
  - the word characters of Unicode regular expressions (\w in Rust's regex crate, which
    tokenizers' single_word test uses): Alphabetic, marks, decimal digits, connector
    punctuation and the two joiners. unicodedata has no Alphabetic property; it is
    letters, letter numbers (Nl) and the Other_Alphabetic symbols listed below (the
    Other_Alphabetic marks are marks anyway).

Hugging Face `tokenizers` normalizes with the Rust crate unicode-normalization-alignments,
whose tables are older than any recent Python's; the data differs only for code points
assigned after that version. The script records the version it ran with.

Usage:  python3 tools/gen_unicode_norm_tables.py [OUT_DIR]          (default src/tokenizer)
        python3 tools/gen_unicode_norm_tables.py --check [OUT_DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata

MAX_CODEPOINTS = 0x110000
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def code_points():
    for cpt in range(MAX_CODEPOINTS):
        if 0xD800 <= cpt <= 0xDFFF:
            continue
        yield cpt


def canonical_decompositions() -> list[tuple[int, int, int]]:
    """[(code point, first, second or 0)] for every canonical decomposition."""
    out = []
    for cpt in code_points():
        if HANGUL_FIRST <= cpt <= HANGUL_LAST:
            continue
        d = unicodedata.decomposition(chr(cpt))
        if not d or d.startswith("<"):
            continue
        parts = [int(p, 16) for p in d.split()]
        assert 1 <= len(parts) <= 2, (hex(cpt), d)
        out.append((cpt, parts[0], parts[1] if len(parts) == 2 else 0))
    return out


def combining_class_ranges() -> list[tuple[int, int, int]]:
    """[(first, last, class)] over runs of code points with the same non-zero class."""
    out: list[list[int]] = []
    for cpt in code_points():
        ccc = unicodedata.combining(chr(cpt))
        if ccc == 0:
            continue
        if out and out[-1][1] == cpt - 1 and out[-1][2] == ccc:
            out[-1][1] = cpt
        else:
            out.append([cpt, cpt, ccc])
    return [tuple(r) for r in out]


def compositions(decomps) -> list[tuple[int, int, int]]:
    """[(first, second, composite)] sorted by (first, second)."""
    out = []
    for cpt, first, second in decomps:
        if second == 0:
            continue
        if unicodedata.normalize("NFC", chr(cpt)) != chr(cpt):
            continue  # excluded from composition
        out.append((first, second, cpt))
    return sorted(out)


def lowercase() -> list[tuple[int, int, int]]:
    """[(code point, first, second or 0)] where str.lower() changes the code point."""
    out = []
    for cpt in code_points():
        lower = chr(cpt).lower()
        if lower == chr(cpt):
            continue
        assert 1 <= len(lower) <= 2, hex(cpt)
        out.append((cpt, ord(lower[0]), ord(lower[1]) if len(lower) == 2 else 0))
    return out


# Other_Alphabetic code points of category So (PropList.txt): circled and squared letters.
OTHER_ALPHABETIC_SYMBOLS = [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169),
                            (0x1F170, 0x1F189)]


def word_char_ranges() -> list[tuple[int, int]]:
    """[(first, last)] of the \\w code points, ascending."""
    def is_word(cpt: int) -> bool:
        cat = unicodedata.category(chr(cpt))
        if cat[0] in "LM" or cat in ("Nd", "Nl", "Pc") or cpt in (0x200C, 0x200D):
            return True
        return any(a <= cpt <= b for a, b in OTHER_ALPHABETIC_SYMBOLS)
    out: list[list[int]] = []
    for cpt in code_points():
        if not is_word(cpt):
            continue
        if out and out[-1][1] == cpt - 1:
            out[-1][1] = cpt
        else:
            out.append([cpt, cpt])
    return [tuple(r) for r in out]


def table(lines: list[str], decl: str, rows, fmt: str, per_line: int) -> None:
    lines.append(f"{decl}[{len(rows)}] = {{")
    for i in range(0, len(rows), per_line):
        lines.append("    " + " ".join(fmt % r for r in rows[i:i + per_line]))
    lines.append("};")


# The generated files, one per concept: decomposition, composition (the combining classes
# it orders by and the composites it makes), and case / word characters.
FILES = ("unicode_decomposition_tables.cc", "unicode_composition_tables.cc", "unicode_case_tables.cc")


def render() -> dict[str, str]:
    decomps = canonical_decompositions()
    ccc = combining_class_ranges()
    comps = compositions(decomps)
    lower = lowercase()
    words = word_char_ranges()

    def file(parts) -> str:
        lines = [
            "// Generated by tools/gen_unicode_norm_tables.py from Python's unicodedata",
            f"// (Unicode {unicodedata.unidata_version}). Do not edit by hand; rerun the script.",
            "",
            '#include "tokenizer/unicode_norm_tables.h"',
            "",
            "namespace tandem::unicode_internal {",
            "",
        ]
        for comment, decl, rows, fmt, per_line, count in parts:
            lines.append(comment)
            table(lines, decl, rows, fmt, per_line)
            lines.append(f"const size_t {count} = {len(rows)};")
            lines.append("")
        lines.append("}  // namespace tandem::unicode_internal")
        return "\n".join(lines) + "\n"

    pair = "{0x%05X, 0x%05X, 0x%05X},"
    return {
        FILES[0]: file([("// Canonical decompositions, by code point (second = 0: a singleton).",
                         "const CodepointPair kCanonicalDecompositions", decomps, pair, 3,
                         "kNumCanonicalDecompositions")]),
        FILES[1]: file([("// Canonical combining classes other than 0, as ascending ranges.",
                         "const CombiningClassRange kCombiningClasses", ccc, "{0x%05X, 0x%05X, %d},", 4,
                         "kNumCombiningClasses"),
                        ("// Primary composites, by (first, second).",
                         "const Composition kCompositions", comps, pair, 3, "kNumCompositions")]),
        FILES[2]: file([("// Full lowercase mappings, by code point (second = 0: one code point).",
                         "const CodepointPair kLowercase", lower, pair, 3, "kNumLowercase"),
                        ("// Word characters (regex \\w), as ascending ranges [first, last].",
                         "const CodepointRange kWordChars", words, "{0x%05X, 0x%05X},", 4, "kNumWordChars")]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default="src/tokenizer",
                        help="where the files go (default: src/tokenizer)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a file in OUT_DIR differs from what would be generated")
    args = parser.parse_args()
    for name, text in render().items():
        path = os.path.join(args.out_dir, name)
        if args.check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"{path} is stale; rerun tools/gen_unicode_norm_tables.py", file=sys.stderr)
                    return 1
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
