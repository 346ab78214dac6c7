#!/usr/bin/env bash
# Installs the system packages the test suite needs beyond Python, from Debian's archive:
#   - chromium: the server's playground test drives it headless through playwright (playwright's own
#     browser download does not work on machines without general network access);
#   - g++-aarch64-linux-gnu and qemu-user: the C++ kernels' ARM (NEON) variants are cross-compiled
#     and their tests run under qemu-aarch64 (tests/kernels), so no ARM machine is needed;
#   - ffmpeg: `audiocpp book` writes its .m4b / mp3 / opus files and reads them back with it (tests/book).
# Idempotent: installs only what is missing. Needs root or sudo; says so plainly otherwise.
# Usage: tools/setup_system.sh [--quiet]
set -euo pipefail
quiet=0; [ "${1:-}" = "--quiet" ] && quiet=1
log() { [ "$quiet" = 1 ] || echo "[setup-system] $*" >&2; }

# package -> the file it installs
declare -A wanted=([chromium]=/usr/bin/chromium [g++-aarch64-linux-gnu]=/usr/bin/aarch64-linux-gnu-g++
                   [qemu-user]=/usr/bin/qemu-aarch64 [ffmpeg]=/usr/bin/ffmpeg)
missing=()
for package in chromium g++-aarch64-linux-gnu qemu-user ffmpeg; do
  [ -x "${wanted[$package]}" ] || missing+=("$package")
done
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[setup-system] missing: ${missing[*]}, and this is not a Debian/Ubuntu system (no apt-get):" >&2
  echo "  install them with your package manager (chromium as /usr/bin/chromium; an aarch64 g++ cross" >&2
  echo "  compiler and qemu-aarch64; ffmpeg), or the playground browser test, the ARM kernel tests and the" >&2
  echo "  audiobook tests (tests/book) are skipped" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "[setup-system] missing: ${missing[*]}; installing them needs root:" >&2
  echo "  run 'sudo apt-get install -y ${missing[*]}' (or rerun this script as root);" >&2
  echo "  until then the playground browser test, the ARM kernel tests and the audiobook tests are skipped" >&2
  exit 0
fi
log "installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >&2
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
for package in "${missing[@]}"; do
  [ -x "${wanted[$package]}" ] || { echo "[setup-system] apt-get ran but ${wanted[$package]} is still missing" >&2; exit 1; }
done
log "ready: ${missing[*]}"
