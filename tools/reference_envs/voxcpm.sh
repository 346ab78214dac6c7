#!/usr/bin/env bash
# Builds the reference env .ref-envs/voxcpm: OpenBMB's PyPI `voxcpm==2.0.3` (VoxCPM1, 1.5 and 2
# in one package) on the CPU torch wheel, for the voxcpm2 (and later voxcpm1) parity tests.
#
# voxcpm is installed with --no-deps: its declared dependencies pull gradio, modelscope, funasr,
# torchcodec and a CUDA-linked torchaudio that inference does not need. What inference imports is
# installed explicitly below.
#
# torchaudio: model/voxcpm.py (v1) imports it at module top and uses only `torchaudio.load` and
# `torchaudio.functional.resample`. The PyPI wheel is CUDA-linked and routes `load` through
# torchcodec/FFmpeg, so this script writes a small stand-in package into the env instead:
# `load` reads with soundfile (float32 [C, T]), and `functional.resample` is the identity when
# the rates match and raises otherwise. Parity tests therefore feed prompt and reference audio
# at the VAE's encode rate, so no resampler is exercised on either side (v2's librosa.load
# does not resample then either).
#
# Idempotent: a stamp of this script (and _lib.sh) makes a second run a quick no-op.
source "$(dirname "${BASH_SOURCE[0]}")/_lib.sh"
refenv_start voxcpm "$@"
refenv_log "installing torch==2.13.0 (CPU wheel)"
refenv_pip torch==2.13.0
refenv_log "installing voxcpm==2.0.3 (no dependencies)"
refenv_pip --no-deps voxcpm==2.0.3
refenv_log "installing what inference imports: transformers, einops, pydantic, safetensors, tqdm, soundfile, librosa"
refenv_pip "transformers==5.24.0" einops pydantic safetensors tqdm soundfile "librosa==0.11.0" huggingface_hub

site="$(refenv_site)"
rm -rf "$site/torchaudio"
mkdir -p "$site/torchaudio"
cat > "$site/torchaudio/__init__.py" <<'EOF'
"""audiocpp stand-in for torchaudio (written by tools/reference_envs/voxcpm.sh).

Only what voxcpm 2.0.3 calls: ``load`` (soundfile, float32 [channels, samples]) and
``functional.resample`` (identity when the rates match; anything else is an error, so a
parity test can never compare against a resampler that is not torchaudio's).
"""
import numpy as np
import soundfile as sf
import torch

from . import functional  # noqa: F401

__version__ = "0.0.0+audiocpp-standin"


def load(path, *args, **kwargs):
    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return torch.from_numpy(np.ascontiguousarray(data.T)), int(rate)
EOF
cat > "$site/torchaudio/functional.py" <<'EOF'
"""Stand-in: resampling is refused; parity tests feed audio at the model's rate."""


def resample(waveform, orig_freq, new_freq, *args, **kwargs):
    if int(orig_freq) == int(new_freq):
        return waveform
    raise NotImplementedError(
        f"torchaudio stand-in: resample {orig_freq} -> {new_freq} is not available; "
        "feed reference audio at the model's sample rate"
    )
EOF

"$REFENV_PY" - <<'EOF' || { echo "[ref-env voxcpm] verification failed" >&2; exit 1; }
import warnings
warnings.filterwarnings("ignore")
import torch
import torchaudio
import transformers
import voxcpm
from voxcpm.model.voxcpm import VoxCPMModel  # noqa: F401  (v1 imports torchaudio)
from voxcpm.model.voxcpm2 import VoxCPM2Model  # noqa: F401
assert torch.__version__.startswith("2.13.0"), torch.__version__
print("ok", torch.__version__, transformers.__version__, torchaudio.__version__)
EOF

refenv_finish
