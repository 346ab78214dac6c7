#!/usr/bin/env bash
# Installs the system packages the test suite needs beyond Python: Debian's chromium, which the
# server's playground test drives headless through playwright (playwright's own browser download
# does not work on machines without general network access). Idempotent: does nothing when
# /usr/bin/chromium exists. Needs root or sudo; says so plainly otherwise.
# Usage: tools/setup_system.sh [--quiet]
set -euo pipefail
quiet=0; [ "${1:-}" = "--quiet" ] && quiet=1
log() { [ "$quiet" = 1 ] || echo "[setup-system] $*" >&2; }

if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup-system] /usr/bin/chromium is missing and this is not a Debian/Ubuntu system (no apt-get):" >&2
  echo "  install Chromium with your package manager so that /usr/bin/chromium exists," >&2
  echo "  or the playground browser test (tests/server) will be skipped" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "[setup-system] /usr/bin/chromium is missing and installing it needs root:" >&2
  echo "  run 'sudo apt-get install -y chromium' (or rerun this script as root);" >&2
  echo "  until then the playground browser test (tests/server) is skipped" >&2
  exit 0
fi
log "installing chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >&2
[ -x /usr/bin/chromium ] || { echo "[setup-system] apt-get ran but /usr/bin/chromium is still missing" >&2; exit 1; }
log "ready: /usr/bin/chromium"
