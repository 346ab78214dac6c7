"""Every family on a CUDA GPU against the CPU (skipped without one; tools/gpu_check.sh runs them).

Float32 on the GPU is the exact mode there too: the same seeded request on ``cuda`` and on the
CPU gives the same tokens / codes (the draws come from the request's CPU generator on both) and
latents and audio within float tolerance. bfloat16 (the GPU default) and a Q8_0 package (int8
weights resident, converted per call on the GPU) run and stay close.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.records import TaskRequest
from tests.support import REPO

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (tools/gpu_check.sh)")

AUDIO8_TINY = REPO / "tests" / "data" / "audio8_tts" / "tiny"
TEXT = "Hello world. This is a test."


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run(path: Path, family: str, device: str, request: TaskRequest, compute_dtype: str = "float32",
        task="tts"):
    from audiocpp.engine import load

    model = load(path, family=family, load_options={"device": device})
    return model.session(task, compute_dtype=compute_dtype).run(request)


@pytest.fixture(scope="module")
def voxcpm2_tiny(tmp_path_factory) -> Path:
    from tools.voxcpm2 import checkpoint

    return checkpoint.write_checkpoint(tmp_path_factory.mktemp("v2") / "tiny", checkpoint.TINY_V2, seed=1234)


@pytest.fixture(scope="module")
def omnivoice_demo() -> Path:
    from audiocpp.families.omnivoice import plugin

    return plugin.demo_model_path()


def package(folder: Path, family: str, kind: str, root: Path) -> Path:
    from audiocpp.engine.packaging.cli import package_from_cli

    out = root / f"{family}-{kind}.gguf"
    if not out.exists():
        package_from_cli(out=out, inputs=[str(folder)], spec=None, family=family, weight_type=kind,
                         keep_types=[], overwrite=False)
    return out


@pytest.mark.parametrize("do_sample", [False, True])
def test_audio8_float32_on_cuda_equals_the_cpu(do_sample: bool) -> None:
    request = TaskRequest(text=TEXT, seed=7, options={"max_new_tokens": 24, "do_sample": do_sample})
    cpu, gpu = (run(AUDIO8_TINY, "audio8_tts", d, request) for d in ("cpu", "cuda"))
    assert np.array_equal(cpu.details["codes"][0], gpu.details["codes"][0])
    assert cosine(cpu.audio.samples, gpu.audio.samples) >= 0.9999


def test_voxcpm2_float32_on_cuda_equals_the_cpu(voxcpm2_tiny: Path) -> None:
    request = TaskRequest(text=TEXT, seed=7,
                          options={"min_tokens": 6, "max_tokens": 6, "retry_badcase": False})
    cpu, gpu = (run(voxcpm2_tiny, "voxcpm2", d, request) for d in ("cpu", "cuda"))
    a, b = cpu.details["latents"][0], gpu.details["latents"][0]
    assert a.shape == b.shape and np.abs(a - b).max() < 1e-3 * max(1.0, np.abs(a).max())
    assert cosine(cpu.audio.samples, gpu.audio.samples) >= 0.9999


def test_omnivoice_float32_on_cuda_equals_the_cpu(omnivoice_demo: Path) -> None:
    request = TaskRequest(text=TEXT, seed=3, options={"num_inference_steps": 8})
    cpu, gpu = (run(omnivoice_demo, "omnivoice", d, request) for d in ("cpu", "cuda"))
    assert np.array_equal(cpu.details["tokens"][0], gpu.details["tokens"][0])
    assert cosine(cpu.audio.samples, gpu.audio.samples) >= 0.9999


def test_gpu_defaults_and_quantized_packages_run_close(tmp_path: Path, voxcpm2_tiny: Path) -> None:
    from audiocpp.engine import load
    from audiocpp.engine.nn.linear.quantized import Int8Linear

    request = TaskRequest(text=TEXT, seed=7,
                          options={"min_tokens": 6, "max_tokens": 6, "retry_badcase": False})
    reference = run(voxcpm2_tiny, "voxcpm2", "cpu", request)
    q8 = package(voxcpm2_tiny, "voxcpm2", "q8_0", tmp_path)
    model = load(q8, family="voxcpm2", load_options={"device": "cuda"})
    session = model.session("tts")  # compute_dtype auto: bfloat16 on the GPU
    assert session.dtype == torch.bfloat16
    result = session.run(request)
    net = session.generator.model
    assert any(isinstance(m, Int8Linear) for m in net.base_lm.modules())
    assert next(net.parameters()).device.type == "cuda"
    assert cosine(result.audio.samples, reference.audio.samples) > 0.9

