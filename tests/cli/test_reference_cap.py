"""Long reference audio is capped (issue 11, item 4): the request option max_reference_seconds,
declared by every spec that clones, applied by the base session when the reference is read.

Without a transcript a long reference is cut at a pause to at most 3/4 of the cap (upstream
OmniVoice's trim_long_audio at the default 20 s) with a warning; with a transcript it is
refused, as a cut would no longer match it. Engine tests use a small test family; the CLI
tests run the real CLI.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.engine import AudioBuffer, TaskRequest, UsageError, VoiceReference, get_family
from audiocpp.engine.errors import AudiocppWarning
from audiocpp.engine.loaded_model import LoadedModel
from audiocpp.engine.session import Session, Synthesis
from audiocpp.engine.spec import load_spec_file
from tests.support import cli_ok, run_cli

RATE = 16000
TOY_SPEC = (Path(__file__).resolve().parents[1] / "data" / "audiocpp_toyfamily" / "src" / "audiocpp_toyfamily"
            / "toytone.json")


def speech_like(seconds: float, rate: int = RATE) -> np.ndarray:
    """2 s tones separated by 0.5 s of silence: the pauses a cut may use."""
    t = np.arange(int(2.0 * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    gap = np.zeros(int(0.5 * rate), np.float32)
    pieces: list[np.ndarray] = []
    while sum(len(p) for p in pieces) < seconds * rate:
        pieces += [tone, gap]
    return np.concatenate(pieces)[: int(seconds * rate)]


class EchoSession(Session):
    """Returns its (prepared) reference as the audio, so tests see what the base session did."""

    def _synthesize(self, request):
        voice = request.voice if request.voice is not None else AudioBuffer(np.zeros(160, np.float32), RATE)
        if False:  # a generator that yields nothing
            yield voice
        return Synthesis(audio=voice)


class EchoModel(LoadedModel):
    sample_rate = RATE

    def _create_session(self, task, mode, options):
        return EchoSession(self, task, mode, options)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> EchoModel:
    """A cloning family whose spec declares the cap as the built-in cloning specs do."""
    cap_row = next(r for r in get_family("voxcpm2").spec.options.request if r.name == "max_reference_seconds")
    cap_row = cap_row.model_dump(mode="json", exclude_none=True)
    spec = json.loads(TOY_SPEC.read_text())
    spec.update(family="echo", display_name="Echo", tasks=["tts", "clone"], modes=["offline"], detection={},
                options={"request": [{"name": "reference_text", "type": "string", "description": "transcript",
                                      "required": False}, cap_row], "session": [], "load": []})
    path = tmp_path_factory.mktemp("echo") / "echo.json"
    path.write_text(json.dumps(spec))
    return EchoModel(load_spec_file(path), None)


def _clone(model, samples: np.ndarray, **options):
    request = TaskRequest(text="Hi.", voice=VoiceReference(audio=AudioBuffer(samples, RATE)), options=options)
    return model.session("clone").run(request).audio


def test_every_cloning_spec_declares_the_same_cap() -> None:
    from audiocpp.engine import families

    rows = {}
    for name, plugin in families().items():
        if "clone" in plugin.spec.tasks:
            row = next((r for r in plugin.spec.options.request if r.name == "max_reference_seconds"), None)
            assert row is not None, f"{name} clones but has no max_reference_seconds"
            rows[name] = (row.type, row.default, row.min)
    assert set(rows) >= {"omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"}
    assert set(rows.values()) == {("float", 20.0, 0)}


def test_long_reference_without_transcript_is_cut_at_a_pause_with_a_warning(model) -> None:
    samples = speech_like(30.0)
    with pytest.warns(AudiocppWarning,
                      match=r"is 30\.0 s long, over the 20 s cap; using its first 1\d\.\d s"):
        audio = _clone(model, samples)
    assert 3.0 <= audio.duration <= 15.0
    cut = audio.num_samples
    assert np.abs(samples[cut - int(0.1 * RATE): cut]).max() < 1e-3, "not cut in a pause"
    np.testing.assert_allclose(audio.samples, samples[:cut], atol=1 / 32768)  # upstream's int16 round trip


def test_the_cap_is_an_option(model) -> None:
    samples = speech_like(30.0)
    with pytest.warns(AudiocppWarning, match="over the 8 s cap"):
        assert _clone(model, samples, max_reference_seconds=8).duration <= 6.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", AudiocppWarning)
        assert _clone(model, samples, max_reference_seconds=0).num_samples == len(samples)  # 0: no cap
        short = speech_like(12.0)
        assert _clone(model, short).num_samples == len(short)  # under the cap: untouched


def test_long_reference_with_a_transcript_is_refused(model) -> None:
    with pytest.raises(UsageError, match="over the 20 s cap") as info:
        _clone(model, speech_like(25.0), reference_text="what is said")
    assert "max_reference_seconds" in (info.value.hint or "")


# -- the real CLI --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["omnivoice", "voxcpm2", "voxcpm1", "audio8_tts"])
def test_cli_refuses_a_long_reference_with_a_transcript_before_loading(family: str, tmp_path: Path) -> None:
    ref = tmp_path / "long.wav"
    sf.write(ref, speech_like(25.0), RATE)
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "x.wav"
    proc = run_cli("--family", family, "--model", empty, "--task", "clon", "--voice-ref", ref,
                   "--reference-text", "what is said", "--text", "Hi.", "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: the reference audio") and "25.0 s long" in proc.stderr
    assert "max_reference_seconds=N" in proc.stderr and not out.exists()


def test_cli_cuts_a_long_reference_without_transcript_and_warns(tmp_path: Path) -> None:
    from tools.voxcpm2 import checkpoint

    ckpt = checkpoint.write_checkpoint(tmp_path / "tiny", checkpoint.TINY_V2, seed=1234)
    ref = tmp_path / "long.wav"
    sf.write(ref, speech_like(3.0), RATE)
    out = tmp_path / "x.wav"
    # the tiny model holds 512 positions: a small cap keeps the reference within them
    stdout = cli_ok("--model", ckpt, "--task", "clon", "--voice-ref", ref, "--text", "Hi.", "--seed", "1",
                    "-r", "max_reference_seconds=1.2", "-r", "max_tokens=4", "-r", "retry_badcase=false",
                    "--out", out)
    warning = [ln for ln in stdout.splitlines() if ln.startswith("warning: ")]
    assert len(warning) == 1, stdout
    assert "is 3.0 s long, over the 1.2 s cap; using its first 0.9 s" in warning[0], stdout
    assert out.exists()
