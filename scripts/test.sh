#!/usr/bin/env bash
# The whole test suite, on a fresh machine with only the Rust toolchain and apt:
# installs what it needs (scripts/setup-tools.sh --test), checks format and lints, builds the page
# and the binary, then runs every test (unit, contract, black-box on the embedded store and on
# private redis-server processes, and the headless-Chromium page test).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export PATH="$HOME/.cargo/bin:$here/.tools/node_modules/.bin:$PATH"
export CARGO_TERM_COLOR=never

step() { printf '\n=== %s\n' "$*"; }

step "tools"
bash scripts/setup-tools.sh --test

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --all-targets -- -D warnings
cargo clippy -p vestibule-frontend --target wasm32-unknown-unknown -- -D warnings
cargo clippy -p vestibule-console --target wasm32-unknown-unknown -- -D warnings

step "page and console (release WASM)"
bash scripts/build-page.sh

step "binary"
cargo build -p vestibule

step "tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Native crates (unit, contract, black-box, browser) and the page's and the console's own unit
# tests (run on the host).
cargo test --no-fail-fast --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
cargo test --no-fail-fast -p vestibule-frontend --bins "$@" 2>&1 | tee -a "$log" || status=$?
cargo test --no-fail-fast -p vestibule-console --bins "$@" 2>&1 | tee -a "$log" || status=$?

# One closing line for the whole suite.
read -r passed failed < <(awk '/^test result:/ {
    for (i = 2; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) }
  } END { print p + 0, f + 0 }' "$log")
echo
echo "suite: $passed passed, $failed failed"
if [ "$passed" -eq 0 ]; then
  echo "no test ran" >&2
  exit 1
fi
exit "$status"
