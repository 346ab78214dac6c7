#!/usr/bin/env bash
# Builds the reference env .ref-envs/torchaudio: the upstream code that engine/audio and
# engine/text must match (torchaudio.functional.resample, pydub 0.25.1's silence functions,
# OmniVoice 0.2.1's utils/audio.py and utils/text.py, loaded by file path so that its heavy
# package __init__ never runs).
#
# torchaudio 2.11.1 (the newest on PyPI) is CUDA-linked and does not match torch 2.13, so its
# native libraries are renamed away: `import torchaudio` then works as pure Python, which is
# all torchaudio.functional.resample needs (the torchaudio workaround).
#
# Idempotent: a stamp of this script (and _lib.sh) makes a second run a quick no-op.
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
refenv_start torchaudio "$@"
refenv_log "installing torch==2.13.0 (CPU wheel), pydub==0.25.1, numpy, soundfile"
refenv_pip torch==2.13.0
refenv_pip pydub==0.25.1 numpy soundfile
refenv_log "installing torchaudio==2.11.1, omnivoice==0.2.1 (no dependencies)"
refenv_pip --no-deps torchaudio==2.11.1 omnivoice==0.2.1
refenv_disable_torchaudio_native

"$REFENV_PY" - <<'EOF' || { echo "[ref-env torchaudio] verification failed" >&2; exit 1; }
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

refenv_finish
