#!/usr/bin/env bash
# Builds the OmniVoice reference virtualenv .ref-envs/omnivoice: upstream omnivoice==0.2.1
# (PyPI) with transformers 5.x for HiggsAudioV2TokenizerModel, on the pinned CPU torch.
# This script is the recipe. Usage: bash tools/reference_envs/omnivoice.sh [--force]
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
refenv_start omnivoice "$@"
# pip's resolver complains that gradio, librosa... (CLI/training-only deps) are missing.
REFENV_PIP_FILTER="omnivoice"
refenv_pip "torch==2.13.0"
refenv_pip --no-deps "omnivoice==0.2.1" "torchaudio==2.11.1"
refenv_pip "transformers==5.18.0" accelerate soundfile pydub numpy "gguf==0.19.0"
refenv_disable_torchaudio_native
"$REFENV_PY" - <<'PY'
import warnings
warnings.filterwarnings("ignore")
import torch, torchaudio, transformers
from omnivoice import OmniVoice  # noqa: F401
from transformers import HiggsAudioV2TokenizerModel  # noqa: F401
x = torchaudio.functional.resample(torch.zeros(1, 16000), 16000, 24000)
assert x.shape == (1, 24000), x.shape
print("[ref-env omnivoice] ok: torch", torch.__version__, "transformers", transformers.__version__)
PY
refenv_finish
