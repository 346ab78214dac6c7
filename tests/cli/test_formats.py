"""mp3 and opus (issue 14): written by the real CLI and read back where the installed libsndfile
writes them (soundfile reports it), else one error naming the formats there are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.engine.audio.io import available_write_formats, check_write_format, read_audio
from audiocpp.engine.errors import UsageError
from tests.cli.conftest import CLI_ENV, ok
from tests.support import run_cli


def _correlation(a: np.ndarray, b: np.ndarray, reach: int = 2000) -> float:
    """The best normalised correlation of ``a`` with ``b`` shifted by up to ``reach`` samples."""
    n = min(len(a), len(b)) - reach
    ref = b[reach:reach + n]
    best = 0.0
    for lag in range(0, 2 * reach):
        seg = a[lag:lag + n]
        if len(seg) == n:
            best = max(best, float(np.dot(seg, ref) / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12)))
    return best


@pytest.fixture(scope="module")
def reference(demo_prompt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("formats") / "ref.wav"
    ok(run_cli("codec", "decode", demo_prompt, "--out", path, "--format", "wav32", env=CLI_ENV))
    return path


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
def test_lossy_formats_round_trip_or_are_refused(fmt: str, demo_prompt: Path, reference: Path,
                                                 tmp_path: Path) -> None:
    out = tmp_path / f"voice.{fmt}"
    proc = run_cli("codec", "decode", demo_prompt, "--out", out, env=CLI_ENV)
    if fmt not in available_write_formats():
        assert proc.returncode == 2 and "formats available here" in proc.stderr and not out.exists()
        return
    ok(proc)
    info = sf.info(out)
    assert (info.format, info.subtype) == (("MP3", "MPEG_LAYER_III") if fmt == "mp3" else ("OGG", "OPUS"))
    back = read_audio(out)  # the engine reads it back
    want, rate = sf.read(reference, dtype="float32")
    assert back.sample_rate == rate == 24000 and abs(back.num_samples - len(want)) <= rate // 10
    # the demo's random weights decode to loud noise, hard for a perceptual codec; speech would do better
    assert _correlation(back.samples, want) > 0.8
    assert abs(float(np.sqrt(np.mean(back.samples ** 2)) / np.sqrt(np.mean(want ** 2))) - 1) < 0.2


def test_missing_codec_is_one_error_naming_what_there_is(monkeypatch: pytest.MonkeyPatch) -> None:
    import soundfile

    real = soundfile.available_subtypes
    monkeypatch.setattr(soundfile, "available_subtypes",
                        lambda major=None: {k: v for k, v in real(major).items()
                                            if k not in ("OPUS", "MPEG_LAYER_III")})
    assert "mp3" not in available_write_formats() and "wav16" in available_write_formats()
    with pytest.raises(UsageError) as info:
        check_write_format("opus", "--out 'x.opus'")
    assert "does not write opus" in info.value.message and "wav16, wav24" in (info.value.hint or "")


def test_mismatched_extension_and_sample_rate(demo_dir: Path, tmp_path: Path) -> None:
    proc = run_cli("--model", demo_dir, "--text", "Hi.", "--format", "mp3", "--out", tmp_path / "x.wav",
                   env=CLI_ENV)
    assert proc.returncode == 2 and "name the file x.mp3" in proc.stderr
