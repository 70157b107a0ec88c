#!/usr/bin/env bash
# Regenerates the generated tables of docs/configuration.md from the binary: every flag
# (`vestibule docs flags`) and every room setting (`vestibule docs settings`), each written
# between its marker comments (<!-- flags:begin --> … <!-- flags:end -->, and settings:…).
# backend/tests/cli.rs fails when the committed tables differ from what the binary prints.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
export PATH="$HOME/.cargo/bin:$PATH"
doc=docs/configuration.md
cargo build -q -p vestibule
for table in flags settings; do
  generated=$(mktemp)
  spliced=$(mktemp)
  cargo run -q -p vestibule -- docs "$table" >"$generated"
  begin="<!-- $table:begin -->"
  end="<!-- $table:end -->"
  if ! grep -qxF "$begin" "$doc" || ! grep -qxF "$end" "$doc"; then
    echo "docs-tables: $doc lacks the lines $begin and $end" >&2
    exit 1
  fi
  awk -v begin="$begin" -v end="$end" -v file="$generated" '
    $0 == begin { print; print ""; while ((getline line < file) > 0) print line; print ""; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
  ' "$doc" >"$spliced"
  mv "$spliced" "$doc"
  rm -f "$generated"
  echo "docs-tables: wrote the $table table of $doc"
done
