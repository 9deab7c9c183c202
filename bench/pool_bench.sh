#!/usr/bin/env bash
# Pool throughput on this machine: starts etcd and two pool workers (127.0.0.1 and
# 127.0.0.2, loopback TCP between them), runs pool_bench, and stops everything by pid.
#   bench/pool_bench.sh [BUILD_DIR] [pool_bench flags...]
# BUILD_DIR defaults to build; it must hold src/cli/tandem and src/pool/pool_bench.
set -euo pipefail
BUILD=${1:-build}
shift || true
TANDEM=${TANDEM_BIN:-$BUILD/src/cli/tandem}
BENCH=$BUILD/src/pool/pool_bench
WORK=$(mktemp -d /tmp/tandem-pool-bench-XXXXXX)
export TANDEM_POOL_RUN_DIR=$WORK/run
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EP=$(port); PP=$(port); W1=$(port); W2=$(port)
etcd --name b --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
  --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
  --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "b=http://127.0.0.1:$PP" \
  >"$WORK/etcd.log" 2>&1 &
ETCD_PID=$!
cleanup() {
  "$TANDEM" pool stop --worker_address "127.0.0.1:$W1" >/dev/null 2>&1 || true
  "$TANDEM" pool stop --worker_address "127.0.0.2:$W2" >/dev/null 2>&1 || true
  kill "$ETCD_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$EP/health" >/dev/null && break; sleep 0.2; done
for w in "127.0.0.1:$W1" "127.0.0.2:$W2"; do
  "$TANDEM" pool start -w --worker_address "$w" --etcd_address "127.0.0.1:$EP" \
    --shared_memory_size_mb "${SHM_MB:-4096}" --node_timeout_s 10 --node_dead_timeout_s 20 \
    --liveness_check_path "$WORK/liveness-$w" --metrics_port 0 >/dev/null
done
"$BENCH" --put_worker "127.0.0.1:$W1" --get_worker "127.0.0.2:$W2" "$@"
