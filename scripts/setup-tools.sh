#!/usr/bin/env bash
# Installs what the build and the test suite need, skipping every step already done.
# Pinned versions: keep them equal to Cargo.lock / Trunk.toml (see TOOLCHAIN notes in README).
#   --page   : wasm32 target, trunk, wasm-bindgen-cli, wasm-opt (binaryen from npm), brotli
#   --test   : the above plus redis-server, redis-cli, Chromium, ChromeDriver, axe-core and
#              eventsource (npm)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

TRUNK_VERSION=0.21.14
# The test suite's Python tools (the OpenAPI fuzzer, the example client's libraries, and PyJWT
# with `cryptography` that verifies entry tokens from the JWKS: tests/tests/entry_tokens.rs).
PYTHON_TOOLS="schemathesis==4.32.5 httpx==0.28.1 httpx-sse==0.4.3 requests==2.32.5 PyJWT[crypto]==2.15.1 cryptography==50.0.2 h2==4.4.1"
WASM_BINDGEN_VERSION=0.2.130
BINARYEN_VERSION=132
AXE_CORE_VERSION=4.11.0
# A standard EventSource client for the SSE reconnect test (tests/tests/api/sse.rs).
EVENTSOURCE_VERSION=4.1.1

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --page) ;;
    *) echo "setup-tools: unknown option $arg" >&2; exit 2 ;;
  esac
done

log() { printf '[setup] %s\n' "$*" >&2; }
export PATH="$HOME/.cargo/bin:$PATH"

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! trunk --version 2>/dev/null | grep -q " $TRUNK_VERSION"; then
  log "installing trunk $TRUNK_VERSION (takes several minutes once)"
  cargo install trunk --locked --version "$TRUNK_VERSION" -j 2
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION"; then
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  # Not --locked: its lock file names a webpki-roots that the index no longer has.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force -j 2
fi

tools="$here/.tools"
if [ ! -x "$tools/node_modules/.bin/wasm-opt" ]; then
  command -v npm >/dev/null || { log "npm is missing: apt-get install -y npm"; apt-get install -y npm; }
  log "installing wasm-opt (binaryen@$BINARYEN_VERSION from npm) into .tools/"
  mkdir -p "$tools"
  (cd "$tools" && npm install --no-audit --no-fund --silent "binaryen@$BINARYEN_VERSION" >/dev/null)
fi

# The page's precompressed copies (scripts/build-page.sh); gzip is part of every Debian.
command -v brotli >/dev/null || apt_install brotli

if [ "$want_test" = 1 ]; then
  command -v redis-server >/dev/null || apt_install redis-server
  # The Redis Cluster tests create their cluster with redis-cli (package redis-tools).
  command -v redis-cli >/dev/null || apt_install redis-tools
  # The gate test sends one request with curl, an independent HTTP client.
  command -v curl >/dev/null || apt_install curl
  # The SSE-behind-a-proxy test (and the benchmark's gate comparison) put nginx in front.
  [ -x /usr/sbin/nginx ] || [ -x /usr/bin/nginx ] || apt_install nginx-light
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    apt_install chromium chromium-driver
  fi
  venv="$tools/venv"
  if ! "$venv/bin/python" -c 'import schemathesis, httpx, httpx_sse, requests, jwt, cryptography, h2' 2>/dev/null; then
    command -v python3 >/dev/null || apt_install python3
    python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; python3 -m venv "$venv"; }
    log "installing Python test tools into .tools/venv: $PYTHON_TOOLS"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet --disable-pip-version-check $PYTHON_TOOLS
  fi
  # Korean glyphs for the page's screenshots (without them Hangul renders as boxes).
  [ -d /usr/share/fonts/truetype/nanum ] || apt_install fonts-nanum
  # Accessibility checks of the page in every state (tests/tests/browser.rs injects it).
  if [ ! -f "$tools/node_modules/axe-core/axe.min.js" ]; then
    log "installing axe-core@$AXE_CORE_VERSION from npm into .tools/"
    (cd "$tools" && npm install --no-audit --no-fund --silent "axe-core@$AXE_CORE_VERSION" >/dev/null)
  fi
  if [ ! -f "$tools/node_modules/eventsource/package.json" ]; then
    log "installing eventsource@$EVENTSOURCE_VERSION from npm into .tools/"
    (cd "$tools" && npm install --no-audit --no-fund --silent "eventsource@$EVENTSOURCE_VERSION" >/dev/null)
  fi
fi
log "tools ready"
