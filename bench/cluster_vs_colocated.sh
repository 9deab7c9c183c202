#!/usr/bin/env bash
# The local PD cluster (./run.sh's deploy/local.json: etcd, pool worker, P on core 0,
# D on core 1, proxy on :8000) against one colocated engine on the same two cores, with
# `tandem bench serve` on the random and shared-prefix workloads. Prints vLLM-style
# result blocks; JSON results land in $OUT (default /tmp/cluster_vs_colocated).
#
#   bench/cluster_vs_colocated.sh [BUILD_DIR] [NUM_PROMPTS] [CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${2:-32}
C=${3:-4}
TANDEM=$BUILD/src/cli/tandem
OUT=${OUT:-/tmp/cluster_vs_colocated}
mkdir -p "$OUT"

workloads() {  # $1 = label, $2 = base URL, $3 = tokenizer URL, $4.. = metrics URLs
  local label=$1 url=$2 tok=$3
  shift 3
  local metrics=(--tokenizer-url "$tok")
  for m in "$@"; do metrics+=(--metrics-url "$m"); done
  "$TANDEM" bench serve --base-url "$url" --workload random --num-prompts "$N" --input-len 256 \
    --output-len 64 --ignore-eos --max-concurrency "$C" --seed 1 --disable-progress \
    --result-file "$OUT/$label-random.json" "${metrics[@]}"
  "$TANDEM" bench serve --base-url "$url" --workload shared-prefix --num-prompts "$N" --prefix-len 512 \
    --num-prefixes 4 --input-len 64 --output-len 64 --ignore-eos --max-concurrency "$C" --seed 2 \
    --disable-progress --result-file "$OUT/$label-shared-prefix.json" "${metrics[@]}"
}

echo "== local PD cluster (deploy/local.json)"
rm -rf .tandem/bench
"$TANDEM" up deploy/local.json --run-dir .tandem/bench --detach
trap '"$TANDEM" down deploy/local.json --run-dir .tandem/bench || true' EXIT
workloads pd http://127.0.0.1:8000 http://127.0.0.1:8100 http://127.0.0.1:8100/metrics http://127.0.0.1:8200/metrics
"$TANDEM" down deploy/local.json --run-dir .tandem/bench
trap - EXIT

echo "== one colocated engine, 2 threads on cores 0-1"
PORT=8300
"$TANDEM" serve models/default.gguf --host 127.0.0.1 --port $PORT --served-model-name default \
  --threads 2 --cpu-affinity 0,1 --enable-prompt-tokens-details >"$OUT/colocated.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf http://127.0.0.1:$PORT/health >/dev/null && break; sleep 0.5; done
workloads colocated http://127.0.0.1:$PORT http://127.0.0.1:$PORT
kill $PID
wait $PID || true
