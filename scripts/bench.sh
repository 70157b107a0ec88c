#!/usr/bin/env bash
# The flash-sale benchmark in one command (see BENCHMARKS.md):
#   scripts/bench.sh            short profile (≤ 5 min): what BENCHMARKS.md records
#   scripts/bench.sh full       the issue's whole scale (~20 min)
#   scripts/bench.sh tiny       seconds; the same code the smoke test runs
# Extra arguments go to `vestibule-bench run`, e.g. --stages sale,capacity --spike-per-sec 20000;
# VESTIBULE_BIN=path measures another build of the server.
# Builds both binaries in release, raises the open-files limit (50,000 SSE streams need it),
# starts its own redis-server processes on free ports, and writes the table and a JSON twin to
# target/bench/. Everything runs on 127.0.0.1 (SSE streams also from 127.0.0.2 and up).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export PATH="$HOME/.cargo/bin:$PATH"

profile=short
case "${1:-}" in
  tiny|short|full) profile=$1; shift ;;
esac

command -v redis-server >/dev/null || { echo "bench: redis-server is missing (apt-get install redis-server)" >&2; exit 2; }
command -v redis-benchmark >/dev/null || { echo "bench: redis-benchmark is missing (apt-get install redis-tools)" >&2; exit 2; }

# VESTIBULE_BIN=/path/to/vestibule measures that binary (e.g. one built from another commit).
if [ -n "${VESTIBULE_BIN:-}" ]; then
  cargo build --release -p vestibule-bench
  server="$VESTIBULE_BIN"
else
  cargo build --release -p vestibule -p vestibule-bench
  server="$here/target/release/vestibule"
fi

# One descriptor per SSE stream in the load generator and one in the server.
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true

out="$here/target/bench"
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
./target/release/vestibule-bench run --profile "$profile" \
  --vestibule-bin "$server" \
  --out "$out/report-$profile-$stamp.md" --json "$out/report-$profile-$stamp.json" "$@"
echo "bench: table in target/bench/report-$profile-$stamp.md" >&2
