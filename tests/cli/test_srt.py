"""``--srt`` (issue 14): a 4-cue SRT dubbed by the real CLI into one timeline whose cue regions
hold each cue's speech at its start (within 20 ms) and silence between; malformed SRTs give one
clear error naming every bad cue, before any model loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.cli.dubbing import fit
from audiocpp.engine.errors import UsageError
from audiocpp.engine.text.srt import parse_srt, read_srt
from tests.cli.conftest import CLI_ENV, best_lag, ok
from tests.support import run_cli

SRT = """1
00:00:00,500 --> 00:00:01,700
Hello there.

2
00:00:02,000 --> 00:00:03,000
How are you today, <i>my friend</i>?

3
00:00:03,400 --> 00:00:04,100
Fine.

4
00:00:05,250 --> 00:00:06,500
See you soon,
my friend.
"""


def test_four_cues_land_in_their_slots_with_silence_between(demo_dir: Path, demo, tmp_path: Path) -> None:
    import audiocpp.engine as ac

    srt = tmp_path / "talk.srt"
    srt.write_text(SRT, encoding="utf-8")
    out = tmp_path / "dub.wav"
    proc = run_cli("--model", demo_dir, "--srt", srt, "--seed", "11", "--format", "wav32", "--out", out,
                   env=CLI_ENV)
    ok(proc)
    timeline, rate = sf.read(out, dtype="float32")
    assert rate == 24000 and len(timeline) == round(6.5 * rate)
    cues = read_srt(srt)
    assert [c.text for c in cues][1:] == ["How are you today, my friend?", "Fine.",
                                          "See you soon, my friend."]
    assert proc.stderr.count("cue=") == 4
    session = demo.session("tts")
    speech = np.zeros(len(timeline), bool)
    tolerance = round(0.020 * rate)
    for cue in cues:
        start, end = round(cue.start * rate), round(cue.end * rate)
        # the cue alone, as the CLI asks for it (OmniVoice's duration control set to the slot) ...
        alone = session.run(ac.TaskRequest(text=cue.text, seed=11, options={"duration": cue.duration})).audio
        expected, how = fit(alone.samples, rate, end - start)
        assert f"cue={cue.number} " in proc.stderr and how in proc.stderr
        # ... is found in the timeline at the cue's start, sample for sample
        lag = best_lag(timeline, expected, start, reach=round(0.1 * rate))
        assert abs(lag - start) <= tolerance
        assert float(np.abs(timeline[lag:lag + len(expected)] - expected).max()) < 1e-4
        onset = start + int(np.flatnonzero(np.abs(timeline[start:end]) > 1e-3)[0])
        assert onset - start <= tolerance  # the speech starts with the cue
        speech[start:end] = True
    assert not np.any(timeline[~speech])  # exact silence outside the cues


BAD = {
    "overlap": ("1\n00:00:01,000 --> 00:00:03,000\nOne.\n\n2\n00:00:02,000 --> 00:00:04,000\nTwo.\n",
                ["cue 2 (line 6): starts at 00:00:02,000, before cue 1 ends at 00:00:03,000"]),
    "end before start": ("1\n00:00:05,000 --> 00:00:04,000\nOne.\n",
                         ["cue 1 (line 2): ends at 00:00:04,000"]),
    "bad timestamp": ("1\n00:00:01 -> 00:00:02\nOne.\n\n2\n00:00:03,000 --> 00:00:04,000\nTwo.\n",
                      ["cue 1 (line 2): bad timing line '00:00:01 -> 00:00:02'"]),
    "out of order": ("1\n00:00:05,000 --> 00:00:06,000\nOne.\n\n2\n00:00:01,000 --> 00:00:02,000\nTwo.\n",
                     ["cue 2 (line 6): starts at 00:00:01,000, before cue 1 (which starts at 00:00:05,000)"]),
    "no number": ("00:00:01,000 --> 00:00:02,000\nOne.\n", ["cue 1 (line 1): the cue number is missing"]),
    "no text": ("1\n00:00:01,000 --> 00:00:02,000\n<i></i>\n", ["cue 1 (line 1): has no text"]),
    "minutes": ("7\n00:75:00,000 --> 00:76:00,000\nOne.\n",
                ["cue 7 (line 2): minutes and seconds must be below 60"]),
    "empty": ("\n\n", ["no cues found"]),
    "several": ("1\n00:00:01,000 --> 00:00:03,000\nOne.\n\n2\n00:00:02,000 --> 00:00:04,000\nTwo.\n\n"
                "3\nnonsense\nThree.\n",
                ["has 2 problems", "cue 2 (line 6)", "cue 3 (line 10): bad timing line"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_srt_is_one_error_naming_the_cues(case: str) -> None:
    text, needles = BAD[case]
    with pytest.raises(UsageError) as info:
        parse_srt(text)
    for needle in needles:
        assert needle in info.value.message
    assert "HH:MM:SS,mmm --> HH:MM:SS,mmm" in (info.value.hint or "")


def test_parse_tolerates_bom_crlf_dots_and_positions() -> None:
    cues = parse_srt("\ufeff1\r\n00:00:01.5 --> 00:00:02,250 X1:40 X2:600\r\n{\\an8}Top <b>line</b>\r\n")
    assert [(c.number, c.start, c.end, c.text) for c in cues] == [(1, 1.5, 2.25, "Top line")]


def test_malformed_srt_through_the_cli_fails_before_loading(tmp_path: Path) -> None:
    srt = tmp_path / "bad.srt"
    srt.write_text(BAD["several"][0], encoding="utf-8")
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--srt", srt, "--out", out, env=CLI_ENV)
    assert proc.returncode == 2 and not out.exists() and proc.stdout == ""
    assert proc.stderr.count("error:") == 1 and "cue 2 (line 6)" in proc.stderr and "cue 3" in proc.stderr
    assert "demo model" not in proc.stderr and "Traceback" not in proc.stderr  # nothing was loaded
    proc = run_cli("--family", "omnivoice", "--srt", srt, "--text", "Hi.", "--out", out, env=CLI_ENV)
    assert proc.returncode == 2 and "--srt gives the text" in proc.stderr


def test_fit_pads_trims_then_compresses() -> None:
    rate = 24000
    tone = (0.5 * np.cos(2 * np.pi * 200 * np.arange(rate) / rate)).astype(np.float32)
    padded, how = fit(tone, rate, rate + 100)
    assert how == "padded" and np.array_equal(padded[:rate], tone) and not padded[rate:].any()
    quiet = np.concatenate([np.zeros(300, np.float32), tone, np.zeros(500, np.float32)])
    trimmed, how = fit(quiet, rate, rate + 200)  # 600 too long: the 300 leading, then 300 trailing
    assert how.startswith("trimmed") and np.array_equal(trimmed, quiet[300:300 + rate + 200])
    squeezed, how = fit(tone, rate, rate // 2)
    assert how == "compressed x2.00" and len(squeezed) == rate // 2
    spectrum = np.abs(np.fft.rfft(squeezed * np.hanning(len(squeezed))))
    assert abs(np.argmax(spectrum) * rate / len(squeezed) - 200) < 5  # the pitch is kept
