"""Kokoro's layouts: hexgrad's folder (detected from its config.json, voices from voices/*.pt or an npz
archive), our package made from it (F32 gives the folder's audio; Q8_0 loads and speaks), the PyPI parts
(a damaged part is an error and leaves no file), and damaged voice files."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import audiocpp.engine as ac
from audiocpp.engine.errors import ModelError
from tests.support import run_cli

from .cases import HELLO


def speak(model_path: Path, voice: str = "af_test") -> np.ndarray:
    model = ac.load(model_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = model.session("tts").run(ac.TaskRequest(text=HELLO, seed=5,
                                                         options={"phonemes": True, "voice": voice}))
    return result.audio.samples


def test_folder_is_detected_from_its_config(tiny_ckpt: Path) -> None:
    assert ac.detect_family(tiny_ckpt).name == "kokoro"


def test_package_f32_gives_the_folders_audio_and_q8_0_speaks(tiny_ckpt: Path, tmp_path: Path) -> None:
    f32, q8 = tmp_path / "k-f32.gguf", tmp_path / "k-q8.gguf"
    for out, kind in ((f32, "f32"), (q8, "q8_0")):
        proc = run_cli("package", "--family", "kokoro", "--input", tiny_ckpt, "--type", kind, "--out", out)
        assert proc.returncode == 0, proc.stderr
    assert ac.detect_family(f32).name == "kokoro"
    folder = speak(tiny_ckpt)
    assert np.array_equal(speak(f32), folder)
    quantized = speak(q8)  # durations may move on random weights: Q8_0 rounds PL-BERT's linears
    assert quantized.size > 0 and np.isfinite(quantized).all()
    assert q8.stat().st_size < 0.6 * f32.stat().st_size
    assert [v["name"] for v in ac.load(q8).named_voices()] == ["af_test", "jf_test"]


def test_voices_from_an_npz_archive(tiny_ckpt: Path, tmp_path: Path) -> None:
    folder = tmp_path / "npz"
    shutil.copytree(tiny_ckpt, folder, ignore=shutil.ignore_patterns("voices"))
    packs = {p.stem: torch.load(p, weights_only=True).numpy() for p in (tiny_ckpt / "voices").glob("*.pt")}
    np.savez(folder / "voices-v1.0.bin", **packs)
    (folder / "voices-v1.0.bin.npz").rename(folder / "voices-v1.0.bin")
    assert np.array_equal(speak(folder), speak(tiny_ckpt))


@pytest.mark.parametrize("damage", ["not a pickle", "shape", "nan"])
def test_damaged_voice_files_are_model_errors(tiny_ckpt: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / damage.replace(" ", "_")
    shutil.copytree(tiny_ckpt, folder)
    target = folder / "voices" / "af_test.pt"
    if damage == "not a pickle":
        target.write_bytes(b"garbage" * 10)
    elif damage == "shape":
        torch.save(torch.zeros(3, 4), target)
    else:
        torch.save(torch.full((510, 1, 256), float("nan")), target)
    with pytest.raises(ModelError) as info:
        ac.load(folder)
    assert "af_test" in info.value.message or "voice" in info.value.message.lower()


def test_a_damaged_pypi_part_is_an_error_and_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    import importlib.resources

    from audiocpp.families.kokoro import pypi_model

    if not pypi_model.installed():
        pytest.skip("Kokoro's PyPI parts are not installed")
    real = importlib.resources.files
    bad = tmp_path / "bad"
    bad.mkdir()
    part = Path(str(real(pypi_model.PARTS[2]) / "part.bin"))
    data = bytearray(part.read_bytes())
    data[1000] ^= 0xFF
    (bad / "part.bin").write_bytes(bytes(data))
    monkeypatch.setattr(importlib.resources, "files",
                        lambda name: bad if name == pypi_model.PARTS[2] else real(name))
    target = tmp_path / "out" / "kokoro.onnx"
    with pytest.raises(ModelError, match="damaged") as info:
        pypi_model.assemble(target)
    assert "reinstall" in (info.value.hint or "")
    assert not target.exists() and list((tmp_path / "out").iterdir()) == []
