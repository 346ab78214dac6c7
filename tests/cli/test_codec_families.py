"""``audiocpp codec`` for the other families with a codec (issue 14): VoxCPM2 / VoxCPM1 latents and
Audio8 TTS's 10xT codes, on tiny checkpoints. The real CLI encodes and decodes (the decode is the
family's own decoding, exactly); a prompt file clones exactly like ``--voice-ref`` with the same
audio and transcript, and is what ``--voice-prompt-out`` saves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

import audiocpp.engine as ac
from audiocpp.engine.audio.io import available_write_formats, read_audio
from audiocpp.engine.registry import get_family
from audiocpp.engine.voice_prompt import read_prompt_dict
from tests.cli.conftest import CLI_ENV, ok
from tests.support import REPO, run_cli, voice_like_signal

TRANSCRIPT = "the words in it"
FAMILIES = ["voxcpm2", "voxcpm1", "audio8_tts"]
LIMIT = {"voxcpm2": {"max_tokens": 12}, "voxcpm1": {"max_tokens": 12}, "audio8_tts": {"max_new_tokens": 12}}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tools.voxcpm2 import checkpoint

    root = tmp_path_factory.mktemp("codec-families")
    return {"voxcpm2": checkpoint.write_checkpoint(root / "v2", checkpoint.TINY_V2, seed=1234),
            "voxcpm1": checkpoint.write_checkpoint(root / "v1", checkpoint.TINY_V1, seed=99),
            "audio8_tts": REPO / "tests" / "data" / "audio8_tts" / "tiny"}


@pytest.fixture(scope="module")
def models(checkpoints: dict[str, Path], _one_thread) -> dict[str, object]:
    return {name: get_family(name).load(path) for name, path in checkpoints.items()}


@pytest.fixture(scope="module")
def short_ref(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # short: the tiny models' context is small
    path = tmp_path_factory.mktemp("codec-families-ref") / "ref.wav"
    sf.write(path, voice_like_signal(3, 1234, 16000), 16000, subtype="FLOAT")
    return path


def _own_decode(model, data: dict) -> np.ndarray:
    """The family's own decoder on the prompt's tensors (not the codec hook)."""
    if "ref_audio_tokens" in data:
        return model.parts.codec.decode(data["ref_audio_tokens"][None])[0, 0].numpy()
    from audiocpp.families.voxcpm2.generate import _latents

    latents = data["reference_latents"] if "reference_latents" in data else data["prompt_latents"]
    return model.parts.codec.decode(_latents(latents))[0, 0].numpy()


@pytest.mark.parametrize("family", ["voxcpm2", "audio8_tts"])
def test_cli_encode_then_decode_is_the_family_decode(family: str, checkpoints, models, short_ref: Path,
                                                     tmp_path: Path) -> None:
    prompt, out = tmp_path / "v.prompt", tmp_path / "back.wav"
    stdout = ok(run_cli("codec", "encode", short_ref, "--model", checkpoints[family],
                        "--reference-text", TRANSCRIPT, "--out", prompt, env=CLI_ENV))
    assert f"family={family}" in stdout
    data = read_prompt_dict(prompt)
    model = models[family]
    mine = model.encode_voice_prompt(read_audio(short_ref), TRANSCRIPT, {})
    assert data["family"] == family and data["ref_text"] == TRANSCRIPT and data["sample_rate"] > 0
    for name, tensor in mine.tensors.items():
        assert torch.equal(data[name], tensor), name
    ok(run_cli("codec", "decode", prompt, "--model", checkpoints[family], "--format", "wav32", "--out", out,
               env=CLI_ENV))
    got, rate = sf.read(out, dtype="float32")
    own = _own_decode(model, data)
    assert rate == model.sample_rate and got.shape == own.shape and float(np.abs(got - own).max()) == 0.0
    if family == "audio8_tts" and "opus" in available_write_formats():  # 44.1 kHz: opus takes 48 kHz
        proc = run_cli("codec", "decode", prompt, "--model", checkpoints[family],
                       "--out", tmp_path / "x.opus", env=CLI_ENV)
        assert "resampling the 44100 Hz audio to 48000 Hz" in ok(proc) + proc.stderr
        assert sf.info(tmp_path / "x.opus").samplerate == 48000


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_clones_like_voice_ref_and_is_what_voice_prompt_out_saves(family: str, models, short_ref: Path,
                                                                         tmp_path: Path) -> None:
    model = models[family]
    encoded = model.encode_voice_prompt(read_audio(short_ref), TRANSCRIPT, {})
    prompt = tmp_path / "v.prompt"
    encoded.save(prompt)
    session = model.session("clon")
    by_prompt = session.run(ac.TaskRequest(text="Hello there.", voice_prompt=prompt, seed=2,
                                           options=LIMIT[family]))
    by_ref = session.run(ac.TaskRequest(text="Hello there.", voice=ac.VoiceReference(path=short_ref),
                                        reference_text=TRANSCRIPT, seed=2, options=LIMIT[family]))
    assert by_prompt.audio.num_samples > 0 and np.array_equal(by_prompt.audio.samples, by_ref.audio.samples)
    saved = tmp_path / "out.prompt"
    by_ref.voice_prompt.save(saved)  # --voice-prompt-out
    assert {k: v.shape for k, v in read_prompt_dict(saved).items() if isinstance(v, torch.Tensor)} == \
        {k: v.shape for k, v in encoded.tensors.items()}
    for name, tensor in encoded.tensors.items():
        assert torch.equal(read_prompt_dict(saved)[name], tensor)
    decoded = model.decode_voice_prompt(model.load_voice_prompt(prompt))
    assert decoded.sample_rate == model.sample_rate
    assert np.array_equal(decoded.samples, _own_decode(model, read_prompt_dict(prompt)))


def test_what_each_family_keeps(models, short_ref: Path) -> None:
    audio = read_audio(short_ref)
    v2 = models["voxcpm2"].encode_voice_prompt(audio, None, {})  # no transcript: the isolated reference only
    assert set(v2.tensors) == {"reference_latents"} and v2.ref_text == ""
    v2t = models["voxcpm2"].encode_voice_prompt(audio, TRANSCRIPT, {})
    assert set(v2t.tensors) == {"reference_latents", "prompt_latents"}
    assert set(models["voxcpm1"].encode_voice_prompt(audio, TRANSCRIPT, {}).tensors) == {"prompt_latents"}
    codes = models["audio8_tts"].encode_voice_prompt(audio, TRANSCRIPT, {}).tensors["ref_audio_tokens"]
    assert codes.dtype == torch.int64 and codes.shape[0] == 10


@pytest.mark.parametrize("family", ["voxcpm1", "audio8_tts"])
def test_a_prompt_without_transcript_is_refused_where_the_family_needs_one(family: str, models,
                                                                          short_ref: Path,
                                                                          tmp_path: Path) -> None:
    model = models[family]
    prompt = tmp_path / "bare.prompt"
    model.encode_voice_prompt(read_audio(short_ref), None, {}).save(prompt)
    with pytest.raises(ac.UsageError, match="transcript"):
        model.session("clon").run(ac.TaskRequest(text="Hi.", voice_prompt=prompt, options=LIMIT[family]))


def test_a_prompt_of_another_family_is_refused(models, demo_prompt: Path) -> None:
    with pytest.raises(ac.UsageError, match="made by omnivoice"):
        models["voxcpm2"].load_voice_prompt(demo_prompt)
