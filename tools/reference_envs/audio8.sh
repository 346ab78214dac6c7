#!/usr/bin/env bash
# Builds the reference env .ref-envs/audio8 for the Audio8 TTS family: torch 2.13.0 (CPU) with
# transformers 4.57.x, the version the upstream code (Audio8-AI/Audio8_TTS@14468db) and the
# 0.1B wrapper's `FalconH1Model` backbone run with (transformers 5.x renames the hybrid cache
# class the 0.1B remote code uses; docs/families/audio8_tts-0.1b.md).
#
# The upstream 0.6B code has no pip package and is never committed: tools/audio8_tts/ takes the
# path of a checkout and writes goldens under tests/data/audio8_tts/. In CI this env runs the
# live FalconH1Model comparisons.
#
# torchaudio (the processor's reference resampler) is installed without its native libraries:
# torchaudio.functional.resample is plain torch (see tools/reference_envs/torchaudio.sh).
#
# Idempotent: a stamp of this script (and _lib.sh) makes a second run a quick no-op.
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
refenv_start audio8 "$@"
refenv_log "installing torch==2.13.0 (CPU wheel), transformers==4.57.6, safetensors, numpy, soundfile, tqdm"
refenv_pip torch==2.13.0
refenv_pip "transformers==4.57.6" safetensors numpy soundfile tqdm
refenv_log "installing torchaudio==2.11.1 (no dependencies, pure Python)"
refenv_pip --no-deps torchaudio==2.11.1
refenv_disable_torchaudio_native

"$REFENV_PY" - <<'PYEOF' || { echo "[ref-env audio8] verification failed" >&2; exit 1; }
import sys
import warnings
warnings.filterwarnings("ignore")
import torch
import torchaudio.functional
import transformers
from transformers import FalconH1Config, FalconH1Model  # noqa: F401
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert transformers.__version__.startswith("4.57."), transformers.__version__
y = torchaudio.functional.resample(torch.zeros(1, 16000), 16000, 44100)
assert tuple(y.shape) == (1, 44100), y.shape
print("[ref-env audio8] verified: torch", torch.__version__, "transformers", transformers.__version__,
      file=sys.stderr)
PYEOF

refenv_finish
