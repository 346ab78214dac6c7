"""On a host above AVX2, one parity case and one batching case per family, the kernels' own tests
and the engine's quantized-layer tests also run in a process held to AVX2
(``engine.nn.kernels.cpu_isa.LEVEL_ENV["avx2"]``: our kernels' level and torch's, oneDNN's and MKL's), as on
an AVX2 laptop: exact against upstream and batched exactly there too. (The whole parity and batching
suites pass at every level; this keeps a sample of them in every CI run.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from audiocpp.engine.nn.kernels import cpu_isa
from tests.support import REPO

#: A parity case and a batching case per family, and what proves the level.
CASES = [
    "tests/engine/test_kernel_levels.py::test_a_process_held_to_a_level_runs_it",
    "tests/engine/test_q8_0_linear.py",
    "tests/omnivoice/test_parity.py::test_tokens_codes_and_audio[auto_sampled]",
    "tests/omnivoice/test_batching.py::test_every_case_in_one_batch_gives_its_lone_result",
    "tests/voxcpm2/test_parity.py::test_generate_matches_upstream[clone_both]",
    "tests/voxcpm2/test_batching.py::test_every_case_in_one_batch_gives_its_lone_result",
    "tests/voxcpm1/test_parity.py::test_generate_matches_upstream[tiny_05b:clone]",
    "tests/voxcpm1/test_batching.py::test_every_case_in_one_batch_gives_its_lone_result[tiny_05b]",
    "tests/audio8_tts/test_parity.py::test_generation_matches_upstream[tts_sampled]",
    "tests/audio8_tts/test_batching.py::test_every_case_in_one_batch_gives_its_lone_result",
]


@pytest.mark.slow
@pytest.mark.skipif(cpu_isa.arch() != "x86_64" or cpu_isa.rank(cpu_isa.host_level()) <= cpu_isa.rank("avx2")
                    or not cpu_isa.cpu_has(cpu_isa.LEVEL_FLAGS["avx2"]),
                    reason="a host above AVX2 (on an AVX2 host the whole suite runs at AVX2)")
def test_a_sample_of_the_suites_passes_on_an_avx2_cpu() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env.update(cpu_isa.LEVEL_ENV["avx2"])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CASES], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout.splitlines()[-1] and "skipped" not in proc.stdout.splitlines()[-1], tail
