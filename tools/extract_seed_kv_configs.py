#!/usr/bin/env python3
"""Extracts every --kv-transfer-config JSON from the seed deployment guides, verbatim
(shell quoting undone; the shell variable $4 replaced by a port number, as the shell
would), into tests/data/seed_kv_transfer_configs.json for the config parser's tests.

Usage: tools/extract_seed_kv_configs.py SEED.txt [SEED.txt ...] > tests/data/seed_kv_transfer_configs.json
"""
import json
import pathlib
import re
import sys


def extract(path):
    text = pathlib.Path(path).read_text()
    for m in re.finditer(r"--kv-transfer-config\s*\\?\s*\n?\s*(['\"])", text):
        quote, i = m.group(1), m.end()
        j = i
        while text[j] != quote:
            j += 2 if (quote == '"' and text[j] == "\\") else 1
        raw = text[i:j]
        if quote == '"':
            raw = raw.replace('\\"', '"')
        raw = raw.replace("$4", "7001")
        role = json.loads(raw).get("kv_role")
        yield {"source": pathlib.Path(path).name, "line": text.count("\n", 0, m.start()) + 1,
               "role": role, "config": raw}


def main():
    entries = [e for p in sys.argv[1:] for e in extract(p)]
    json.dump(entries, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
