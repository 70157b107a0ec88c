#!/usr/bin/env bash
# Builds the waiting-room page in release (dist/index.html + the .wasm) and prints its size.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup-tools.sh --page
export PATH="$HOME/.cargo/bin:$root/.tools/node_modules/.bin:$PATH"

# Trunk.toml has offline = true (it passes --offline to cargo): fetch the crates first.
cargo fetch
trunk build --release

shopt -s nullglob
wasm_files=(dist/*.wasm)
if [ "${#wasm_files[@]}" -ne 1 ]; then
  echo "build-page: expected one .wasm in dist/, found ${#wasm_files[@]}" >&2
  exit 1
fi
wasm=${wasm_files[0]}
raw=$(wc -c <"$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
echo "page wasm: $raw bytes raw, $gz bytes gzip ($wasm)"
