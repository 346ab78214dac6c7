#!/usr/bin/env bash
# Builds the reference env .ref-envs/torchaudio: the upstream code that engine/audio and
# engine/text must match (torchaudio.functional.resample, pydub 0.25.1's silence functions,
# OmniVoice 0.2.1's utils/audio.py and utils/text.py, loaded by file path so that its heavy
# package __init__ never runs).
#
# torchaudio 2.11.1 (the newest on PyPI) is CUDA-linked and does not match torch 2.13, so its
# native libraries are renamed away: `import torchaudio` then works as pure Python, which is
# all torchaudio.functional.resample needs (see shared/reference/omnivoice.md, section 1).
#
# Idempotent: a stamp holding the hash of this script makes a second run a quick no-op.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
envs="${AUDIOCPP_REF_ENVS:-$root/.ref-envs}"
env="$envs/torchaudio"
stamp="$env/.audiocpp-ref-stamp"
want="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
PYTHON="${PYTHON:-python3}"
log() { echo "[ref-env torchaudio] $*" >&2; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$env/bin/python" ]; then
  exit 0
fi

mkdir -p "$envs"
if [ ! -x "$env/bin/python" ]; then
  log "creating $env"
  "$PYTHON" -m venv "$env"
fi
py="$env/bin/python"
pipq=(-q --disable-pip-version-check)
pip_install() { "$py" -m pip install "${pipq[@]}" "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || true; }

log "installing torch==2.13.0 (CPU wheel)"
pip_install torch==2.13.0
log "installing pydub==0.25.1, numpy, soundfile"
pip_install pydub==0.25.1 numpy soundfile
log "installing torchaudio==2.11.1, omnivoice==0.2.1 (no dependencies)"
pip_install --no-deps torchaudio==2.11.1 omnivoice==0.2.1

site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
libdir="$site/torchaudio/lib"
if [ -d "$libdir" ]; then
  for so in "$libdir"/*.so; do
    [ -e "$so" ] || continue
    mv -f "$so" "$so.disabled"
  done
fi

"$py" - <<'EOF' || { echo "[ref-env torchaudio] verification failed" >&2; exit 1; }
import warnings
warnings.filterwarnings("ignore")
import torch
import torchaudio.functional
import pydub.silence  # noqa: F401
import importlib.util, pathlib
x = torch.zeros(1, 16000)
y = torchaudio.functional.resample(x, 16000, 24000)
assert tuple(y.shape) == (1, 24000), y.shape
spec = importlib.util.find_spec("omnivoice")
root = pathlib.Path(spec.submodule_search_locations[0])
assert (root / "utils" / "audio.py").is_file() and (root / "utils" / "text.py").is_file()
print("[ref-env torchaudio] verified: torch", torch.__version__, "torchaudio", torchaudio.__version__, file=__import__("sys").stderr)
EOF

echo "$want" > "$stamp"
log "ready: $env"
