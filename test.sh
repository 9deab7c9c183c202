#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test; the last line is
# "N passed, N failed".
#
#   ./test.sh          release build: unit tests (ctest), integration tests (pytest),
#                      an ASan+UBSan build of the core unit tests (common, kernels,
#                      model, tokenizer, template, kv, socket, transfer, engine, parsers), and
#                      each libFuzzer target for a bounded time (TANDEM_FUZZ_SECONDS,
#                      default 20).
#   ./test.sh --full   the same, with the networking and server unit tests also under
#                      ASan+UBSan (Beast makes that build long on 2 cores) and the serve,
#                      PD, proxy and bad-input integration tests against an ASan+UBSan
#                      `tandem`, plus a
#                      ThreadSanitizer build (build-tsan): all unit tests, then the
#                      serve, PD, proxy and pool integration tests against the TSan
#                      `tandem` binary (a race report fails them).
#   ./test.sh --quick  release unit + integration tests only (no sanitizer, no fuzzing).
set -uo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
MODE=${1:-default}
# ccache hits across checkouts at different paths (CMakeLists.txt uses ccache as the
# compiler launcher): paths under the checkout are hashed relative to it, and the
# working directory is left out of the hash.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
JOBS=$(nproc)

passed=0
failed=0
failures=()
record() {  # record NAME PASSED FAILED
  passed=$((passed + $2))
  failed=$((failed + $3))
  if [ "$3" -gt 0 ]; then failures+=("$1: $3 failed"); fi
}
finish() {
  echo
  echo "== done (at ${SECONDS}s)"
  if [ ${#failures[@]} -gt 0 ]; then printf 'FAILED: %s\n' "${failures[@]}"; fi
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

# ctest summary "X% tests passed, F tests failed out of T" -> record.
run_ctest() {  # run_ctest NAME BUILD_DIR [ctest args...]
  local name=$1 dir=$2
  shift 2
  local log="$dir/ctest.log"
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS" "$@" 2>&1 | tee "$log" | grep -E "Test +#|tests passed|\*\*\*|Failed|Error" || true
  local line total fails
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -n 1)
  if [ -z "$line" ]; then
    record "$name (no ctest summary)" 0 1
    return
  fi
  fails=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  record "$name" $((total - fails)) "$fails"
}

scripts/setup.sh || { record setup 0 1; finish; }

echo "== build (release) (at ${SECONDS}s)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build -j"$JOBS" || { record build 0 1; finish; }

echo "== fixtures (at ${SECONDS}s)"
python3 tools/make_fixtures.py build/fixtures || { record fixtures 0 1; finish; }
python3 tools/make_hf_fixtures.py build/fixtures/hf >/dev/null || { record hf-fixtures 0 1; finish; }
export TANDEM_FIXTURE_DIR=$ROOT/build/fixtures
# The reference GGUFs of the HF fixtures, from llama.cpp's own converter, when its
# environment is set up (TANDEM_HF_REFERENCE=1 scripts/setup.sh); tests skip them otherwise.
if why=$(scripts/convert_hf_reference.sh --check); then
  echo "== reference GGUFs (llama.cpp's convert_hf_to_gguf.py) (at ${SECONDS}s)"
  rm -rf build/fixtures/hf-gguf
  scripts/convert_hf_reference.sh build/fixtures/hf build/fixtures/hf-gguf --q8_0 llama,qwen3moe,glm-dsa ||
    record hf-reference 0 1
else
  rm -rf build/fixtures/hf-gguf
  echo "skipped the reference GGUFs: $why"
fi

echo "== unit tests (release) (at ${SECONDS}s)"
run_ctest unit build

# pytest summary "N passed, F failed, E errors" -> record.
run_pytest() {  # run_pytest NAME LOG [pytest args...]
  local name=$1 log=$2
  shift 2
  python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$log" | tail -n 30
  local summary p f
  summary=$(grep -E "^(=+ )?[0-9]+ (passed|failed|error)" "$log" | tail -n 1)
  p=$(echo "$summary" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || echo 0)
  f=$(echo "$summary" | grep -oE "[0-9]+ (failed|error|errors)" | grep -oE "[0-9]+" | paste -sd+ | bc 2>/dev/null || echo 0)
  [ -z "$p" ] && p=0
  [ -z "$f" ] && f=0
  if [ -z "$summary" ]; then f=1; fi
  record "$name" "$p" "$f"
}

echo "== integration tests (pytest) (at ${SECONDS}s)"
TANDEM_BIN=$ROOT/build/src/cli/tandem run_pytest pytest build/pytest.log tests

if [ "$MODE" != "--quick" ]; then
  echo "== unit tests under ASan+UBSan (at ${SECONDS}s)"
  ASAN_TARGETS=(common_test kernels_test model_test tokenizer_test template_test kv_test socket_test transfer_test engine_test kv_connector_test parsers_test dist_test)
  [ "$MODE" = "--full" ] && ASAN_TARGETS+=(net_test server_test)
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON >/dev/null &&
    cmake --build build-asan -j"$JOBS" --target "${ASAN_TARGETS[@]}" || record asan-build 0 1
  # The real-model tests are slow under ASan and exercise the same code as the fixtures;
  # binaries left out of this build show up as *_NOT_BUILT.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest asan build-asan -E "RealModel|SparsePerplexity|NOT_BUILT"

  if [ "$MODE" = "--full" ]; then
    echo "== kernel microbenchmarks compile (bench/kernels_bench*.cc) (at ${SECONDS}s)"
    cmake --build build -j"$JOBS" --target kernels_bench || record kernels-bench-build 0 1
    echo "== integration tests under ASan+UBSan (serve, PD, proxy, bad input, pool, security) (at ${SECONDS}s)"
    # The ASan `tandem` (built with the targets above): a memory error or UB ends a server
    # at once, LeakSanitizer reports leaks at shutdown, and the test harness fails a test
    # whose processes printed any sanitizer report (tests/tandem_procs.py, stop()).
    cmake --build build-asan -j"$JOBS" --target tandem pool_tool || record asan-tandem-build 0 1
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      TANDEM_BIN=$ROOT/build-asan/src/cli/tandem run_pytest pytest-asan build-asan/pytest.log \
      tests/test_serve.py tests/test_pd.py tests/test_proxy.py tests/test_bad_input.py tests/test_pool.py \
      tests/test_pool_connector.py tests/test_security.py
  fi

  echo "== fuzzing (bounded) (at ${SECONDS}s)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTANDEM_FUZZ=ON -DTANDEM_BUILD_TESTS=OFF >/dev/null &&
    cmake --build build-fuzz -j"$JOBS" --target gguf_fuzz safetensors_fuzz hf_checkpoint_fuzz tokenizer_json_fuzz transfer_fuzz http_fuzz chat_template_fuzz \
      pool_wire_fuzz || record fuzz-build 0 1
  for fuzzer in build-fuzz/fuzz/*_fuzz; do
    [ -x "$fuzzer" ] || continue
    name=$(basename "$fuzzer")
    corpus=fuzz/corpus/${name%_fuzz}
    work=build-fuzz/corpus-$name
    mkdir -p "$work"
    # Seed with the small fixture files (the generator's valid GGUFs).
    [ "$name" = gguf_fuzz ] && find build/fixtures -name '*.gguf' -size -256k -exec cp {} "$work/" \;
    dict=()
    [ -f "fuzz/${name%_fuzz}.dict" ] && dict=("-dict=fuzz/${name%_fuzz}.dict")
    if "$fuzzer" "${dict[@]}" -max_total_time="${TANDEM_FUZZ_SECONDS:-20}" -rss_limit_mb=2048 -max_len=262144 \
         -artifact_prefix="build-fuzz/$name-" "$work" "$corpus" >"build-fuzz/$name.log" 2>&1; then
      echo "$name: no finding"
      record "$name" 1 0
    else
      echo "$name: FINDING (see build-fuzz/$name.log)"
      tail -n 30 "build-fuzz/$name.log"
      record "$name" 0 1
    fi
  done
fi

if [ "$MODE" = "--full" ]; then
  echo "== unit tests under TSan (at ${SECONDS}s)"
  # scripts/tsan.supp holds only third-party false positives (each with its reason).
  export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$ROOT/scripts/tsan.supp"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_TSAN=ON >/dev/null &&
    cmake --build build-tsan -j"$JOBS" || record tsan-build 0 1
  # As under ASan, the real-model tests are left out (slow, same code as the fixtures).
  run_ctest tsan build-tsan -E "RealModel|NOT_BUILT"

  echo "== integration tests under TSan (serve, PD, proxy, pool) (at ${SECONDS}s)"
  # A race report ends the TSan binary at once (halt_on_error, exit code 66), which these
  # tests see as a failed or crashed server.
  TANDEM_BIN=$ROOT/build-tsan/src/cli/tandem run_pytest pytest-tsan build-tsan/pytest.log \
    tests/test_serve.py tests/test_pd.py tests/test_proxy.py tests/test_pool.py \
    tests/test_pool_connector.py
  unset TSAN_OPTIONS
fi

finish
