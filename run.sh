#!/usr/bin/env bash
# The main job: installs what is missing, builds, fetches the default model and runs it.
# Today that is generation from the default model with a sample prompt; the OpenAI
# server and the local PD cluster replace it as they land.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
PROMPT=${PROMPT:-"<start_of_turn>user
Write a haiku about two processes sharing a cache.<end_of_turn>
<start_of_turn>model
"}
exec build/src/cli/tandem generate --prompt "$PROMPT" -n "${MAX_TOKENS:-96}" --verbose "$@"
