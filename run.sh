#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default model and serves
# it with the OpenAI API on port 8000 (`tandem serve`). The local PD cluster (etcd, pool
# worker, prefill + decode engines, proxy) replaces this as those parts land.
#   PORT=8000 HOST=127.0.0.1 ./run.sh [extra tandem serve flags]
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
cat <<EOM
Serving the default model on http://$HOST:$PORT (Ctrl-C stops it). Try:
  curl http://$HOST:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "default", "messages": [{"role": "user", "content": "Write a haiku about caches."}], "max_tokens": 64}'
EOM
exec build/src/cli/tandem serve models/default.gguf --host "$HOST" --port "$PORT" \
  --served-model-name default --enable-prompt-tokens-details "$@"
