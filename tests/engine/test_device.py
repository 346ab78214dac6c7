"""The ``device`` load option and ``--device``: spellings, ``auto``, an absent device as a usage
error naming the ones this machine has (before any loading, from the CLI and the Python API),
the per-device compute dtype defaults, and a tiny model run with ``--device cpu`` / ``auto``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from audiocpp.engine import device as dev
from audiocpp.engine.device import torch_dtype
from audiocpp.engine.errors import UsageError
from tests.support import REPO, run_cli

HAS_CUDA = torch.cuda.is_available()
HAS_MPS = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
AUDIO8_TINY = REPO / "tests" / "data" / "audio8_tts" / "tiny"
FAMILIES = ("omnivoice", "voxcpm2", "voxcpm1", "audio8_tts")


def test_cpu_is_always_there_and_first() -> None:
    assert dev.available_devices()[0] == "cpu"
    for spelling in ("cpu", "CPU", " cpu ", "cpu:0", torch.device("cpu")):
        assert dev.resolve_device(spelling) == torch.device("cpu")


def test_auto_is_the_best_device() -> None:
    expected = "cuda:0" if HAS_CUDA else "mps" if HAS_MPS else "cpu"
    for spelling in ("auto", "AUTO", " auto"):
        assert str(dev.resolve_device(spelling)) == expected


def test_the_default_is_the_cpu_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    assert dev.resolve_device(None) == dev.resolve_device("") == torch.device("cpu")
    monkeypatch.setenv(dev.DEVICE_ENV, "auto")
    assert dev.resolve_device(None) == dev.resolve_device("auto")
    assert dev.resolve_device("cpu") == torch.device("cpu")  # an explicit value wins
    if not HAS_CUDA:
        monkeypatch.setenv(dev.DEVICE_ENV, "cuda")
        with pytest.raises(UsageError, match="not available"):
            dev.resolve_device(None)


def test_the_environment_can_pin_the_auto_compute_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setenv(dev.COMPUTE_DTYPE_ENV, "bf16")
    assert dev.auto_compute_dtype(cpu, "folder") == torch.bfloat16
    monkeypatch.setenv(dev.COMPUTE_DTYPE_ENV, "int3")
    with pytest.raises(UsageError, match="AUDIOCPP_COMPUTE_DTYPE"):
        dev.auto_compute_dtype(cpu, "folder")


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_an_absent_cuda_device_is_a_usage_error_naming_what_is_there(name: str) -> None:
    with pytest.raises(UsageError) as err:
        dev.resolve_device(name)
    assert f"device {name!r} is not available" in err.value.message
    assert "no CUDA GPU" in err.value.message and "available: cpu" in err.value.message
    assert err.value.exit_code == 2 and "--device cpu" in err.value.hint


@pytest.mark.skipif(HAS_MPS, reason="this machine has MPS")
def test_an_absent_mps_device_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no MPS device"):
        dev.resolve_device("mps")


@pytest.mark.parametrize("name", ["tpu", "gpu", "cuda:x", "cpu:1", "meta"])
def test_unknown_devices_are_usage_errors(name: str) -> None:
    with pytest.raises(UsageError) as err:
        dev.resolve_device(name)
    assert "this machine has: cpu" in err.value.hint


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_cuda_resolves_to_its_first_gpu() -> None:
    assert dev.resolve_device("cuda") == torch.device("cuda", 0)
    with pytest.raises(UsageError, match="not available"):
        dev.resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.parametrize("bf16_in_hardware", [True, False])
def test_compute_dtype_defaults_per_device_and_storage(bf16_in_hardware: bool, monkeypatch) -> None:
    """The CPU's row depends on whether it multiplies bfloat16 in hardware (cpu_isa.native_bf16): both
    tables, whatever CPU runs the test."""
    from audiocpp.engine.nn.kernels import cpu_isa

    monkeypatch.setattr(cpu_isa, "native_bf16", lambda: bf16_in_hardware)
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    cpu_16 = torch.bfloat16 if bf16_in_hardware else torch.float32  # else: widened, or float32-stored
    table = {
        (cpu, "F32"): torch.float32, (cpu, "BF16"): cpu_16, (cpu, "F16"): cpu_16,
        (cpu, "Q8_0"): cpu_16, (cpu, "Q4_0"): cpu_16,
        (cuda, "F16"): torch.float16, (cuda, "BF16"): torch.bfloat16, (cuda, "Q8_0"): torch.bfloat16,
    }
    for (device, stored), dtype in table.items():
        assert dev.default_compute_dtype(device, stored) == dtype
    expected_q8 = "bfloat16" if bf16_in_hardware else "float32-stored"
    assert dev.default_compute_mode(cpu, "Q8_0").name == expected_q8
    assert dev.default_compute_dtype(cuda, "F32") == torch.float32
    assert dev.default_compute_dtype(cuda, "F32", gpu_dtype=torch.float16) == torch.float16
    assert dev.default_compute_dtype(cpu, "F32", gpu_dtype=torch.float16) == torch.float32


def test_auto_compute_dtype_reads_packages_not_folders(tmp_path: Path, monkeypatch) -> None:
    import numpy as np

    from audiocpp.engine.nn.kernels import cpu_isa
    from audiocpp.engine.weights import open_weights
    from tests.engine.weights_builders import write_gguf

    monkeypatch.setattr(cpu_isa, "native_bf16", lambda: True)  # a CPU with bfloat16 units

    big = np.zeros((64, 128), np.float32)
    source = open_weights(write_gguf(tmp_path / "q.gguf", {"w": big, "v": big, "n": np.ones(8, np.float32)},
                                     types={"w": "Q8_0", "v": "Q8_0"}))
    assert dev.storage_dtype(source) == "Q8_0"
    cpu = torch.device("cpu")
    assert dev.auto_compute_dtype(cpu, "gguf", source) == torch.bfloat16
    assert dev.auto_compute_dtype(cpu, "folder", source) == torch.float32  # snapshots: the exact mode


def test_auto_compute_dtype_option_takes_the_model_default() -> None:
    assert torch_dtype("auto", torch.bfloat16) == torch.bfloat16
    assert torch_dtype(None, torch.bfloat16) == torch.bfloat16
    assert torch_dtype("fp32", torch.bfloat16) == torch.float32


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_declares_the_device_option(family: str) -> None:
    from audiocpp.engine.registry import get_family
    from audiocpp.engine.spec.options import resolve_options

    spec = get_family(family).spec
    assert resolve_options(spec, "load", {})["device"] is None  # the CPU, or $AUDIOCPP_DEVICE
    assert resolve_options(spec, "load", {"device": "cpu"})["device"] == "cpu"
    assert resolve_options(spec, "session", {})["compute_dtype"] == "auto"


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
def test_python_load_refuses_an_absent_device() -> None:
    from audiocpp.engine import load

    with pytest.raises(UsageError, match="not available"):
        load(AUDIO8_TINY, family="audio8_tts", load_options={"device": "cuda"})


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
def test_cli_absent_cuda_is_a_usage_error_before_loading(tmp_path: Path) -> None:
    out = tmp_path / "a.wav"
    proc = run_cli("--model", AUDIO8_TINY, "--text", "Hello.", "--device", "cuda", "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert "device 'cuda' is not available" in proc.stderr and "available: cpu" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
    proc = run_cli("--model", AUDIO8_TINY, "--text", "Hello.", "--load-option", "device=tpu", "--out", out)
    assert proc.returncode == 2 and "unknown device 'tpu'" in proc.stderr and not out.exists()


def test_cli_device_cpu_and_auto_run_the_same_audio(tmp_path: Path) -> None:
    import soundfile as sf

    outs = []
    for flag in ("cpu", "auto"):
        out = tmp_path / f"{flag}.wav"
        proc = run_cli("--model", AUDIO8_TINY, "--text", "Hello there.", "--seed", "3", "--device", flag,
                       "--request-option", "max_new_tokens=6", "--out", out, env={"OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stderr
        outs.append(sf.read(out)[0])
    if not HAS_CUDA and not HAS_MPS:  # auto is the CPU here: the same run
        assert (outs[0] == outs[1]).all()


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA GPU")
def test_batch_takes_the_device_load_option(tmp_path: Path) -> None:
    manifest = tmp_path / "lines.jsonl"
    manifest.write_text('{"id": "a", "text": "Hello."}\n', encoding="utf-8")
    proc = run_cli("batch", manifest, "--out-dir", tmp_path / "out", "--model", AUDIO8_TINY,
                   "--load-option", "device=cuda")
    assert proc.returncode == 2 and "device 'cuda' is not available" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
