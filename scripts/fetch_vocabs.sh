#!/usr/bin/env bash
# Extracts llama.cpp's vocab-only GGUF test files (real tokenizers of qwen2, llama3,
# gpt-2, llama-spm, gpt-neox) from the llama-cpp-python sdist into models/vocab/,
# where the tokenizer tests look for them ($TANDEM_SOURCE_DIR/models/vocab/...).
#
# The sdist is taken from $TANDEM_SDIST_DIR (if set) or .cache/sdist/ when it is already
# there, else downloaded with pip into .cache/sdist/. Idempotent.
#
# Usage: scripts/fetch_vocabs.sh
set -euo pipefail

VERSION=0.3.36
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/models/vocab"
VOCABS=(qwen2 llama-bpe gpt-2 llama-spm gpt-neox)
SDIST_NAME="llama_cpp_python-$VERSION.tar.gz"

missing=0
for v in "${VOCABS[@]}"; do
  [[ -s "$DEST/ggml-vocab-$v.gguf" ]] || missing=1
done
if [[ $missing == 0 ]]; then
  echo "fetch_vocabs: all vocab files present in $DEST"
  exit 0
fi

sdist=""
for dir in ${TANDEM_SDIST_DIR:+"$TANDEM_SDIST_DIR"} "$ROOT/.cache/sdist"; do
  if [[ -s "$dir/$SDIST_NAME" ]]; then
    sdist="$dir/$SDIST_NAME"
    break
  fi
done
if [[ -z "$sdist" ]]; then
  mkdir -p "$ROOT/.cache/sdist"
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" \
    -d "$ROOT/.cache/sdist"
  sdist="$ROOT/.cache/sdist/$SDIST_NAME"
fi

mkdir -p "$DEST"
members=()
for v in "${VOCABS[@]}"; do
  members+=("llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf")
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" "${members[@]}"
for v in "${VOCABS[@]}"; do
  mv "$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf" "$DEST/"
done
echo "fetch_vocabs: extracted ${#VOCABS[@]} vocab files into $DEST"
