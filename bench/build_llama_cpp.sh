#!/usr/bin/env bash
# Builds llama.cpp's own benchmark tools (llama-bench, llama-batched-bench, llama-quantize)
# natively, outside the tree, from the llama.cpp source vendored in the llama-cpp-python
# sdist on PyPI: the reference that the speed comparisons in docs/PERFORMANCE.md measure
# in its own benchmark loop (never a per-token Python loop).
#
#   bench/build_llama_cpp.sh [VERSION]     (default 0.3.36, the goldens' version)
#
# LLAMA_ISA=avx2: built for AVX2 (+FMA, F16C) only, whatever this CPU has, in its own
# directory: the build the golden files of tests/data match (llama.cpp's bits depend on
# the ISA it is built for; tools/dump_llama_tensors.py --agreement measures it).
#
# Prints the directory holding the binaries (last line). Reuses a finished build.
set -euo pipefail
VERSION=${1:-0.3.36}
CACHE=${TANDEM_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem-bench}
SRC=$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp
BUILD=$CACHE/llama.cpp-$VERSION-build
# ggml's AMX path (compiled in by -march=native where the CPU reports AMX) dies of an
# invalid opcode in `tileloadd` on the AMX machine these figures were measured on (an
# Intel Xeon VM whose kernel grants the tile state: our own AMX probe runs there), so on
# AMX CPUs the build leaves AMX out (its AVX-512 VNNI kernels remain) unless
# LLAMA_AMX=1 asks for it. Its own build directory, so neither build is reused for the other.
EXTRA_FLAGS=""
if grep -qw amx_tile /proc/cpuinfo && [ "${LLAMA_AMX:-0}" != 1 ]; then
  EXTRA_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  BUILD=$CACHE/llama.cpp-$VERSION-noamx-build
fi
ISA_FLAGS="-DGGML_NATIVE=ON"
if [ "${LLAMA_ISA:-native}" = avx2 ]; then
  ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  EXTRA_FLAGS=""
  BUILD=$CACHE/llama.cpp-$VERSION-avx2-build
elif [ "${LLAMA_ISA:-native}" != native ]; then
  echo "build_llama_cpp.sh: LLAMA_ISA must be native or avx2, not '$LLAMA_ISA'" >&2
  exit 2
fi
if [ -x "$BUILD/bin/llama-bench" ] && [ -x "$BUILD/bin/llama-batched-bench" ] && [ -x "$BUILD/bin/llama-quantize" ]; then
  echo "$BUILD/bin"
  exit 0
fi
mkdir -p "$CACHE"
if [ ! -d "$SRC" ]; then
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$CACHE" >&2
  tar -xzf "$CACHE/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release $ISA_FLAGS -DLLAMA_CURL=OFF \
  -DCMAKE_C_FLAGS="$EXTRA_FLAGS" -DCMAKE_CXX_FLAGS="$EXTRA_FLAGS" \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$BUILD" -j"$(nproc)" --target llama-bench llama-batched-bench llama-quantize >&2
echo "$BUILD/bin"
