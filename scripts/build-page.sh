#!/usr/bin/env bash
# Builds the waiting-room page in release (dist/index.html + the .wasm) and the operator console
# (dist/console/, a second app: nothing of it is in the page), writes brotli and gzip copies of
# every file for the server to send, and prints the sizes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup-tools.sh --page
export PATH="$HOME/.cargo/bin:$root/.tools/node_modules/.bin:$PATH"

# Trunk.toml has offline = true (it passes --offline to cargo): fetch the crates first.
cargo fetch
# The page first: its build empties dist/ (the console's too).
trunk build --release
trunk build --release --config console/Trunk.toml

shopt -s nullglob
wasm_files=(dist/*.wasm)
console_wasm=(dist/console/*.wasm)
if [ "${#wasm_files[@]}" -ne 1 ] || [ "${#console_wasm[@]}" -ne 1 ]; then
  echo "build-page: expected one .wasm in dist/ and in dist/console/, found ${#wasm_files[@]} and ${#console_wasm[@]}" >&2
  exit 1
fi

# Precompressed copies that the server sends to browsers accepting them (backend/src/http/page.rs):
# brotli and gzip at their best levels; compressing once here costs nothing per request.
for file in dist/*.wasm dist/*.js dist/*.css dist/*.html dist/console/*.wasm dist/console/*.js \
  dist/console/*.css dist/console/*.html; do
  brotli --force --best --keep "$file"
  gzip --force --best --keep --no-name "$file"
done

size() { wc -c <"$1" | tr -d ' '; }
for file in "${wasm_files[0]}" dist/*.js; do
  echo "page $(basename "$file"): $(size "$file") bytes raw, $(size "$file.gz") gzip, $(size "$file.br") brotli"
done
for file in "${console_wasm[0]}" dist/console/*.js; do
  echo "console $(basename "$file"): $(size "$file") bytes raw, $(size "$file.gz") gzip, $(size "$file.br") brotli"
done
