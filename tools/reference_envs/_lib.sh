# Shared steps of the reference-env scripts (sourced, not run; bin/test skips files starting with _).
#
#   source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
#   refenv_start NAME "$@"       # exits 0 when .ref-envs/NAME is up to date (stamp = hash of the script)
#   refenv_pip ARGS...           # pip install into the env, quiet, known-harmless noise filtered
#   refenv_disable_torchaudio_native
#   refenv_finish
#
# REFENV_PIP_FILTER may hold extra grep -e patterns of expected pip noise.
set -euo pipefail
REFENV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

refenv_log() { echo "[ref-env $REFENV_NAME] $*" >&2; }

refenv_start() {
  REFENV_NAME="$1"; shift
  REFENV_DIR="${AUDIOCPP_REF_ENVS:-$REFENV_ROOT/.ref-envs}/$REFENV_NAME"
  REFENV_STAMP="$REFENV_DIR/.audiocpp-ref-stamp"
  REFENV_WANT="$(cat "${BASH_SOURCE[1]}" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
  REFENV_PY="$REFENV_DIR/bin/python"
  if [ "${1:-}" != "--force" ] && [ -f "$REFENV_STAMP" ] && [ "$(cat "$REFENV_STAMP")" = "$REFENV_WANT" ] \
      && [ -x "$REFENV_PY" ]; then
    exit 0
  fi
  refenv_log "building $REFENV_DIR"
  rm -rf "$REFENV_DIR"
  mkdir -p "$(dirname "$REFENV_DIR")"
  "${PYTHON:-python3}" -m venv "$REFENV_DIR"
}

refenv_pip() {
  local filters=(-e "^WARNING: Location" -e "dependency resolver" -e "which is not installed")
  local extra
  for extra in ${REFENV_PIP_FILTER:-}; do filters+=(-e "$extra"); done
  "$REFENV_PY" -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "${filters[@]}" >&2 || true
}

refenv_site() { "$REFENV_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# The PyPI torchaudio wheel is CUDA-linked and built for another torch: rename its native
# libraries so `import torchaudio` works as pure Python (functional.resample is plain torch).
refenv_disable_torchaudio_native() {
  local so
  for so in "$(refenv_site)"/torchaudio/lib/*.so; do
    [ -e "$so" ] || continue
    mv -f "$so" "$so.disabled"
  done
}

refenv_finish() {
  echo "$REFENV_WANT" > "$REFENV_STAMP"
  refenv_log "ready: $REFENV_DIR"
}
