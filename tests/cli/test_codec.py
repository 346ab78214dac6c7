"""``audiocpp codec`` (issue 14) on OmniVoice's demo model: encode writes the engine's voice-prompt
file with the codes a ``--voice-ref`` clone prepares; decode gives the family's own decoding of
those codes exactly; a prompt from ``codec encode`` clones exactly like ``--voice-ref`` with the
same audio and transcript; errors are one clear message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from audiocpp.engine.audio.io import read_audio
from audiocpp.engine.voice_prompt import prompt_family, read_prompt_dict
from tests.cli.conftest import CLI_ENV, ok
from tests.support import run_cli

TRANSCRIPT = "What I say in the reference"


def test_encode_writes_the_codes_a_clone_prepares(demo_prompt: Path, ref_wav: Path, demo) -> None:
    data = read_prompt_dict(demo_prompt)
    assert data["family"] == "omnivoice" and data["ref_text"] == TRANSCRIPT + "."
    assert data["sample_rate"] == 24000 and data["frame_rate"] == 25.0 and data["format_version"] == 1
    codes = data["ref_audio_tokens"]
    assert codes.dtype == torch.int64 and codes.shape[0] == 8 and codes.shape[1] == 50  # 2 s at 25 Hz
    mine = demo.encode_voice_prompt(read_audio(ref_wav), TRANSCRIPT, {"preprocess_prompt": True})
    assert torch.equal(mine.ref_audio_tokens, codes) and mine.ref_rms == data["ref_rms"]
    assert prompt_family(demo_prompt) == "omnivoice"


def test_decode_is_the_family_decode_of_the_codes(demo_prompt: Path, demo, tmp_path: Path) -> None:
    out = tmp_path / "back.wav"
    stdout = ok(run_cli("codec", "decode", demo_prompt, "--out", out, "--format", "wav32", env=CLI_ENV))
    assert "ref_audio_tokens=8x50 int64" in stdout and "sample_rate=24000" in stdout
    got, rate = sf.read(out, dtype="float32")
    codes = read_prompt_dict(demo_prompt)["ref_audio_tokens"]
    with torch.inference_mode():
        own = demo.codec.decode(codes.unsqueeze(0))[0, 0].numpy()  # the family's codec, in this process
    assert rate == 24000 and got.shape == own.shape
    assert float(np.abs(got - own).max()) == 0.0


def test_prompt_from_codec_encode_clones_like_voice_ref(demo_dir: Path, demo_prompt: Path, ref_wav: Path,
                                                        tmp_path: Path) -> None:
    common = ("--model", demo_dir, "--task", "clon", "--text", "New words to say.", "--seed", "4",
              "--format", "wav32")
    ok(run_cli(*common, "--voice-prompt", demo_prompt, "--out", tmp_path / "p.wav", env=CLI_ENV))
    ok(run_cli(*common, "--voice-ref", ref_wav, "--reference-text", TRANSCRIPT, "--out", tmp_path / "r.wav",
               env=CLI_ENV))
    by_prompt, _ = sf.read(tmp_path / "p.wav", dtype="float32")
    by_ref, _ = sf.read(tmp_path / "r.wav", dtype="float32")
    assert by_prompt.shape == by_ref.shape and np.array_equal(by_prompt, by_ref)


def test_codec_errors_are_one_clear_message(demo_dir: Path, ref_wav: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.prompt"
    junk.write_bytes(b"not a prompt")
    out = tmp_path / "x.wav"
    proc = run_cli("codec", "decode", junk, "--out", out, env=CLI_ENV)
    assert proc.returncode == 2 and "is not a voice prompt" in proc.stderr and "codec encode" in proc.stderr
    assert not out.exists() and "Traceback" not in proc.stderr
    proc = run_cli("codec", "encode", tmp_path / "missing.wav", "--out", tmp_path / "v.prompt", env=CLI_ENV)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    foreign = tmp_path / "vox.prompt"
    torch.save({"format_version": 1, "family": "voxcpm2", "ref_text": "",
                "reference_latents": torch.zeros(2, 2, 4)}, foreign)
    proc = run_cli("codec", "decode", foreign, "--model", demo_dir, "--out", out, env=CLI_ENV)
    assert proc.returncode == 2 and "made by voxcpm2" in proc.stderr and not out.exists()


def test_a_prompt_without_transcript_is_refused_for_cloning(demo_dir: Path, demo_prompt: Path,
                                                            tmp_path: Path) -> None:
    data = read_prompt_dict(demo_prompt)
    data["ref_text"] = ""
    bare = tmp_path / "bare.prompt"
    torch.save(data, bare)
    out = tmp_path / "x.wav"
    proc = run_cli("--model", demo_dir, "--task", "clon", "--voice-prompt", bare, "--text", "Hi.",
                   "--out", out, env=CLI_ENV)
    assert proc.returncode == 2 and "no transcript" in proc.stderr and not out.exists()
