#!/usr/bin/env bash
# The reference for Tandem's Hugging Face checkpoint reader: llama.cpp's own converter
# (convert_hf_to_gguf.py with its conversion/ package and gguf-py, as vendored in the
# llama-cpp-python 0.3.36 sdist), run on checkpoints such as tools/make_hf_fixtures.py
# writes, through tools/convert_hf_reference.py (which names the pre-tokenizer of a
# fixture's trained tokenizer; see there).
#
#   scripts/convert_hf_reference.sh --setup
#       extracts the converter into .cache/llama.cpp-convert/ (the sdist as
#       scripts/fetch_vocabs.sh finds or downloads it) and creates a Python environment
#       with what it imports: torch, transformers (AutoConfig, AutoTokenizer) and
#       sentencepiece, from PyPI. PyPI's torch for Linux x86-64 is the CUDA build: it
#       brings about 4 GB of nvidia-* wheels, 5.3 GB installed, about 90 s here. Opt-in:
#       scripts/setup.sh runs this only with TANDEM_HF_REFERENCE=1.
#   scripts/convert_hf_reference.sh --check
#       exit 0 when set up; otherwise prints why not and exits 1.
#   scripts/convert_hf_reference.sh HF_DIR OUT_DIR [--q8_0 NAME,...]
#       converts each checkpoint HF_DIR/NAME/ to OUT_DIR/NAME.gguf (--outtype bf16), and
#       the named ones also to OUT_DIR/NAME-q8_0.gguf. Checkpoints without
#       model*.safetensors (msmodelslim's quant_model_weight_* shards) are skipped: the
#       converter reads no other files and would write a GGUF without tensors.
#       Exit 1 when a conversion fails (its log: OUT_DIR/NAME.log).
#
# The environment: $TANDEM_HF_REFERENCE_VENV, default ~/.cache/tandem/hf-reference-venv
# (outside the tree: it is shared by checkouts).
set -euo pipefail

VERSION=0.3.36
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV=${TANDEM_HF_REFERENCE_VENV:-$HOME/.cache/tandem/hf-reference-venv}
CONVERTER="$ROOT/.cache/llama.cpp-convert"
SDIST_NAME="llama_cpp_python-$VERSION.tar.gz"
# Tested together: torch 2.15.0 (CPU use of the CUDA wheel), transformers 4.57.6 (the
# converter's requirements pin), sentencepiece (imported before the converter looks for
# tokenizer.model).
PACKAGES=(torch==2.15.0 transformers==4.57.6 sentencepiece==0.2.3 numpy)

log() { echo "[convert_hf_reference] $*" >&2; }

extract_converter() {
  [[ -s "$CONVERTER/convert_hf_to_gguf.py" && -d "$CONVERTER/conversion" && -d "$CONVERTER/gguf-py" ]] && return 0
  local sdist="" dir
  for dir in ${TANDEM_SDIST_DIR:+"$TANDEM_SDIST_DIR"} "$ROOT/.cache/sdist"; do
    if [[ -s "$dir/$SDIST_NAME" ]]; then sdist="$dir/$SDIST_NAME"; break; fi
  done
  if [[ -z "$sdist" ]]; then
    mkdir -p "$ROOT/.cache/sdist"
    python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$ROOT/.cache/sdist"
    sdist="$ROOT/.cache/sdist/$SDIST_NAME"
  fi
  local prefix="llama_cpp_python-$VERSION/vendor/llama.cpp"
  rm -rf "$CONVERTER.tmp"
  mkdir -p "$CONVERTER.tmp"
  tar -xzf "$sdist" -C "$CONVERTER.tmp" --strip-components=3 \
    "$prefix/convert_hf_to_gguf.py" "$prefix/conversion" "$prefix/gguf-py"
  rm -rf "$CONVERTER"
  mv "$CONVERTER.tmp" "$CONVERTER"
  log "extracted the converter into $CONVERTER"
}

check() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "reference converter not set up: no Python environment at $VENV" \
      "(scripts/convert_hf_reference.sh --setup, or TANDEM_HF_REFERENCE=1 scripts/setup.sh)"
    return 1
  fi
  if ! "$VENV/bin/python" -c "import torch, transformers, sentencepiece" 2>/dev/null; then
    echo "reference converter not set up: $VENV lacks torch, transformers or sentencepiece" \
      "(scripts/convert_hf_reference.sh --setup)"
    return 1
  fi
  if ! extract_converter >/dev/null 2>&1; then
    echo "reference converter not set up: the llama-cpp-python $VERSION sdist could not be found or fetched"
    return 1
  fi
}

setup() {
  extract_converter
  if [[ ! -x "$VENV/bin/python" ]]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import torch, transformers, sentencepiece" 2>/dev/null; then
    log "installing ${PACKAGES[*]} into $VENV (about 5 GB)"
    local start=$SECONDS
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PACKAGES[@]}"
    log "installed in $((SECONDS - start)) s"
  fi
  check
}

convert_one() {  # convert_one MODEL_DIR OUT.gguf OUTTYPE
  local model=$1 out=$2 outtype=$3
  "$VENV/bin/python" "$ROOT/tools/convert_hf_reference.py" --llama-cpp "$CONVERTER" "$model" \
    --outfile "$out" --outtype "$outtype" >"${out%.gguf}.log" 2>&1
}

convert_all() {
  local hf_dir=$1 out_dir=$2 q8=",$3,"
  local why
  if ! why=$(check); then
    echo "$why" >&2
    exit 1
  fi
  mkdir -p "$out_dir"
  local jobs=() model name
  for model in "$hf_dir"/*/; do
    model=${model%/}
    name=$(basename "$model")
    if ! compgen -G "$model/model*.safetensors" >/dev/null; then
      log "$name: skipped (no model*.safetensors: llama.cpp's converter cannot read this layout)"
      continue
    fi
    jobs+=("$model $out_dir/$name.gguf bf16")
    [[ $q8 == *",$name,"* ]] && jobs+=("$model $out_dir/$name-q8_0.gguf q8_0")
  done
  local failed=0 start=$SECONDS job pids=() i=0
  # Two at a time: each is mostly importing torch, which is single-threaded.
  for job in "${jobs[@]}"; do
    # shellcheck disable=SC2086
    convert_one $job &
    pids+=($!)
    if ((${#pids[@]} >= 2)); then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
  done
  for i in "${pids[@]}"; do wait "$i" || failed=1; done
  for job in "${jobs[@]}"; do
    # shellcheck disable=SC2086
    set -- $job
    if [[ -s "$2" ]] && grep -q "Model successfully exported" "${2%.gguf}.log"; then
      log "$(basename "$2"): ok"
    else
      log "$(basename "$2"): FAILED (see ${2%.gguf}.log)"
      failed=1
    fi
  done
  log "${#jobs[@]} conversions in $((SECONDS - start)) s"
  return "$failed"
}

case "${1:-}" in
  --setup) setup ;;
  --check) check ;;
  -h|--help|"") sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' ;;
  *)
    [[ $# -ge 2 ]] || { echo "usage: $0 HF_DIR OUT_DIR [--q8_0 NAME,...]" >&2; exit 2; }
    hf_dir=$1 out_dir=$2 q8=""
    shift 2
    if [[ "${1:-}" == "--q8_0" ]]; then q8=${2:-}; fi
    convert_all "$hf_dir" "$out_dir" "$q8"
    ;;
esac
