#!/usr/bin/env bash
# Builds the OmniVoice reference virtualenv .ref-envs/omnivoice: upstream omnivoice==0.2.1
# (PyPI) with transformers 5.x for HiggsAudioV2TokenizerModel, on the pinned CPU torch.
# Recipe: shared/reference/omnivoice.md §1. Idempotent: a stamp of this script's content
# makes a second run a no-op. Usage: bash tools/reference_envs/omnivoice.sh [--force]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
env_dir="${AUDIOCPP_REF_ENVS:-$root/.ref-envs}/omnivoice"
stamp="$env_dir/.audiocpp-ref-stamp"
want="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
PYTHON="${PYTHON:-python3}"

if [ "${1:-}" != "--force" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && [ -x "$env_dir/bin/python" ]; then
  exit 0
fi
echo "[ref-env omnivoice] building $env_dir" >&2
rm -rf "$env_dir"
mkdir -p "$(dirname "$env_dir")"
"$PYTHON" -m venv "$env_dir"
pip() {
  # pip's resolver complains that gradio, librosa... (CLI/training-only deps) are missing.
  "$env_dir/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | grep -v -e "^WARNING: Location" -e "dependency resolver" -e "omnivoice 0.2.1 requires" >&2 || true
}
pip "torch==2.13.0"
pip --no-deps "omnivoice==0.2.1" "torchaudio==2.11.1"
pip "transformers==5.18.0" accelerate soundfile pydub numpy "gguf==0.19.0"
# The PyPI torchaudio wheel is CUDA-linked: disable its native libraries so it imports as
# pure Python (only torchaudio.functional.resample is used, which is plain torch).
site="$("$env_dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for so in "$site"/torchaudio/lib/*.so; do
  [ -e "$so" ] || continue
  mv "$so" "$so.disabled"
done
"$env_dir/bin/python" - <<'PY'
import warnings
warnings.filterwarnings("ignore")
import torch, torchaudio, transformers
from omnivoice import OmniVoice  # noqa: F401
from transformers import HiggsAudioV2TokenizerModel  # noqa: F401
x = torchaudio.functional.resample(torch.zeros(1, 16000), 16000, 24000)
assert x.shape == (1, 24000), x.shape
print("[ref-env omnivoice] ok: torch", torch.__version__, "transformers", transformers.__version__)
PY
echo "$want" > "$stamp"
