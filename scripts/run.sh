#!/usr/bin/env bash
# Builds the page and runs Vestibule on the embedded store (no Redis needed).
# Extra arguments go to the binary, e.g. scripts/run.sh --bind 0.0.0.0:8080 --admission-rate 50
# `scripts/run.sh --demo [flags]`: the demo (`vestibule demo`): a room `demo` that synthetic
# shoppers join and leave through checkout, in memory only.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export PATH="$HOME/.cargo/bin:$here/.tools/node_modules/.bin:$PATH"
bash scripts/build-page.sh
if [ "${1:-}" = "--demo" ]; then
  shift
  exec cargo run --release -p vestibule -- demo --static-dir "$here/dist" "$@"
fi
exec cargo run --release -p vestibule -- --static-dir "$here/dist" "$@"
