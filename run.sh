#!/usr/bin/env bash
# The main job: installs what is missing, builds `tandem` (the only binary it needs: every
# service of the cluster is a `tandem` subcommand, except etcd, which is the system's;
# ./test.sh builds the tests and the rest), fetches the default model and starts the
# local PD cluster of deploy/local.json with `tandem up`: etcd, a pool worker, a prefill
# and a decode engine (each pinned to its own core) and the proxy on 127.0.0.1:8000. It
# prints a sample curl once everything is ready; Ctrl-C stops every process it started.
#   ./run.sh [tandem up flags]        e.g. ./run.sh --detach, then build/src/cli/tandem down
#   CLUSTER=my_cluster.json ./run.sh  another cluster file (docs/DEPLOY.md)
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tandem
exec build/src/cli/tandem up "${CLUSTER:-deploy/local.json}" "$@"
