"""The real CLI on a tiny random Kokoro checkpoint: phonemes in, voices and mixes, word captions and
timestamps, streaming chunks, `audiocpp voices`, and errors that leave no output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support import read_wav, run_cli

from .cases import HELLO, JAPANESE


def test_phonemes_voice_mix_captions_and_timestamps(tiny_ckpt: Path, tmp_path: Path) -> None:
    out, srt, vtt, stamps = (tmp_path / n for n in ("a.wav", "a.srt", "a.vtt", "a.json"))
    proc = run_cli("--model", tiny_ckpt, "--phonemes", HELLO, "--voice", "jf_test(2)+af_test(1)", "--speed",
                   "1.2", "--seed", "3", "--out", out, "--captions", srt, "--timestamps", stamps, "--metrics")
    assert proc.returncode == 0, proc.stderr
    audio, rate = read_wav(out)
    assert rate == 24000 and audio.size > 0
    words = json.loads(stamps.read_text())["words"]
    assert [w["word"] for w in words] == HELLO.split()
    assert words[-1]["end"] <= audio.size / rate + 1e-6
    assert srt.read_text().startswith("1\n00:00:00,")
    assert "words=[" in proc.stdout
    proc = run_cli("--model", tiny_ckpt, "--phonemes", HELLO, "--out", out, "--captions", vtt)
    assert proc.returncode == 0, proc.stderr
    assert vtt.read_text().startswith("WEBVTT")


def test_streaming_writes_a_chunk_per_sentence(tiny_ckpt: Path, tmp_path: Path) -> None:
    proc = run_cli("--model", tiny_ckpt, "--phonemes", JAPANESE, "--mode", "streaming", "--out-dir",
                   tmp_path / "chunks", "--out", tmp_path / "all.wav", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "chunks").iterdir()) == ["chunk_0.wav", "chunk_1.wav"]


def test_voices_command(tiny_ckpt: Path) -> None:
    proc = run_cli("voices", "--model", tiny_ckpt, "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert [v["name"] for v in listed["voices"]] == ["af_test", "jf_test"] and listed["family"] == "kokoro"
    text = run_cli("voices", "--model", tiny_ckpt).stdout
    assert "jf_test" in text and "Japanese" in text


@pytest.mark.parametrize("args, message", [
    (("--voice", "af_tset"), "unknown voice 'af_tset'"),
    (("--voice", "af_test(2)+"), "voice mix"),
    (("--task", "clon", "--voice-ref", "{ref}", "--reference-text", "hi"), "does not support task 'clon'"),
    (("--captions", "{out_dir}/x.txt"), "must end in .srt or .vtt"),
    (("--text", "hello"), "give the text once"),
])
def test_errors_leave_no_output(tiny_ckpt: Path, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    import numpy as np
    import soundfile as sf

    ref = tmp_path / "ref.wav"
    sf.write(ref, np.zeros(2400, dtype=np.float32), 24000)
    out = tmp_path / "x.wav"
    args = tuple(a.format(ref=ref, out_dir=tmp_path) for a in args)
    proc = run_cli("--model", tiny_ckpt, "--phonemes", HELLO, "--out", out, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_pauses_and_ssml(tiny_ckpt: Path, tmp_path: Path) -> None:
    """``[pause]`` and ``<break>`` splice silence of their length between the parts (each the audio the
    part gives alone, same seed); an SSML document on stdin in streaming mode is read whole; a bad
    marker is a usage error with no output."""
    def speak(*args: str, stdin: str | None = None) -> np.ndarray:
        out = tmp_path / "o.wav"
        proc = run_cli("--model", tiny_ckpt, *args, "--seed", "4", "--out", out, input=stdin)
        assert proc.returncode == 0, proc.stderr
        return read_wav(out)[0]

    one, two = "həlˈO.", "wˈɜɹld."
    parts = [speak("--phonemes", one), speak("--phonemes", two)]
    paused = speak("--phonemes", f"{one} [pause 0.5s] {two} <break time='250ms'/>")
    silence = np.zeros(12000, paused.dtype)
    assert np.array_equal(paused, np.concatenate([parts[0], silence, parts[1], silence[:6000]]))
    streamed = speak("--phonemes", "-", "--mode", "streaming",
                     stdin=f'<speak><p>{one}</p><p>{two}</p></speak> {one}')
    gap = np.zeros(round(0.8 * 24000), paused.dtype)  # between SSML paragraphs
    assert np.array_equal(streamed, np.concatenate([parts[0], gap, parts[1], parts[0]]))
    out = tmp_path / "bad.wav"
    proc = run_cli("--model", tiny_ckpt, "--phonemes", f"{one} [pause 99s]", "--out", out)
    assert proc.returncode == 2 and "over the 30 s" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
