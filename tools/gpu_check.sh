#!/usr/bin/env bash
# The GPU checks of issue 13, ready to run on a machine with a CUDA GPU (CI has none; not run there).
#
#   bash tools/gpu_check.sh            # from the repository root, with the machine's python3 (its torch)
#
# 1. installs audiocpp into that python without touching its torch (--no-deps; wheels of missing
#    dependencies may be put in .whl/ beforehand), and says which imports are missing;
# 2. runs the float32 suites on cuda: AUDIOCPP_DEVICE=cuda and AUDIOCPP_COMPUTE_DTYPE=float32 make
#    every load in the tests go to the GPU in the exact mode (tests/engine/test_device_cuda.py: every
#    family on cuda against the CPU; the Audio8 parity suite against its committed goldens; parity
#    cases that need the reference virtualenvs are skipped there, AUDIOCPP_SKIP_PARITY=1);
# 3. prints GPU RTF: the VoxCPM2-sized benchmark (its checkpoint is built there with this project's
#    own classes, ~5 GB, once) in bf16 and Q8_0 packages with the default options on cuda.
#
# Exit status: that of the first failing step. Environment: PYTHON (default python3), SKIP_BENCH=1.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
status=0
step() { echo; echo "== $*"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"

step "install audiocpp (no dependencies pulled; the machine's torch stays)"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps .whl/*.whl || status=1
fi
$PY -m pip install -q --no-index --no-deps --no-build-isolation -e . || status=1
$PY - <<'PY' || status=1
import importlib
missing = [m for m in ("gguf", "safetensors", "pydantic", "jsonschema", "typer", "soundfile", "tokenizers", "tqdm",
                       "numpy", "pytest") if importlib.util.find_spec(m) is None]
if missing:
    raise SystemExit("missing packages: " + ", ".join(missing) + " (carry their wheels in .whl/)")
import audiocpp.engine.device as d
print("devices:", ", ".join(d.available_devices()))
PY
[ $status -eq 0 ] || exit $status

step "float32 on cuda: every family against the CPU, the Audio8 parity suite (goldens)"
AUDIOCPP_DEVICE=cuda AUDIOCPP_COMPUTE_DTYPE=float32 AUDIOCPP_SKIP_PARITY=1 \
  $PY -m pytest -q -x -p no:cacheprovider tests/engine/test_device_cuda.py tests/engine/test_device.py \
  tests/audio8_tts/test_parity.py || status=$?

if [ "${SKIP_BENCH:-0}" != "1" ]; then
  step "GPU RTF: VoxCPM2-sized, bf16 and Q8_0 packages, default options on cuda"
  $PY tools/bench.py voxcpm2 --weights bf16,q8_0 --device cuda --patches 8 --repeats 3 --threads 4 || status=$?
fi
exit $status
