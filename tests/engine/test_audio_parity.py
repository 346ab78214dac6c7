"""engine.audio against the real upstream code in the reference env .ref-envs/torchaudio:
torchaudio.functional.resample, pydub 0.25.1's silence functions and OmniVoice 0.2.1's
utils/audio.py (remove_silence, trim_long_audio, fade_and_pad_audio, cross_fade_chunks,
load_audio). Every comparison is exact (bit-identical arrays, identical milliseconds).

All jobs run in one reference subprocess (module fixture); each job is one test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import torch

from audiocpp.engine.audio import dsp, silence
from audiocpp.engine.audio.io import read_audio
from audiocpp.engine.audio.resample import resample
from audiocpp.engine.audio.segment import Segment
from tests.support import run_reference

pytestmark = pytest.mark.parity

REFERENCE = Path(__file__).resolve().parent / "reference"

# --------------------------------------------------------------------------- signals


def _tone(rng: np.random.Generator, sr: int, ms: float, amp: float, channels: int) -> np.ndarray:
    n = int(sr * ms / 1000)
    t = np.arange(n) / sr
    f0 = rng.uniform(110, 330)
    wave = np.sin(2 * np.pi * f0 * t) + 0.3 * np.sin(2 * np.pi * 2.7 * f0 * t + 1.0)
    wave *= 0.6 + 0.4 * np.sin(2 * np.pi * 3.0 * t)  # syllable-like envelope
    out = np.stack([wave * amp * rng.uniform(0.7, 1.0) for _ in range(channels)])
    return out + rng.normal(0, 1e-3, out.shape)


def _noise(rng: np.random.Generator, sr: int, ms: float, dbfs: float, channels: int) -> np.ndarray:
    n = int(sr * ms / 1000)
    if dbfs == -np.inf:
        return np.zeros((channels, n))
    return rng.normal(0, 10 ** (dbfs / 20), (channels, n))


def _build(seed: int, sr: int, layout: list[tuple[str, float, float]], channels: int = 1,
           extra: int = 0) -> np.ndarray:
    """``layout`` items: ("tone", ms, amplitude) or ("sil", ms, noise dBFS); ``extra`` samples
    of low noise are appended so the length is not a whole number of milliseconds (when it
    rounds up, pydub pads slices that reach the end with zero frames)."""
    rng = np.random.default_rng(seed)
    parts = [(_tone if kind == "tone" else _noise)(rng, sr, ms, level, channels)
             for kind, ms, level in layout]
    parts.append(_noise(rng, sr, 0, -70, channels) if not extra else rng.normal(0, 1e-4, (channels, extra)))
    return np.concatenate(parts, axis=1).astype(np.float32)


SPEECHY = [("sil", 250, -65), ("tone", 400, 0.5), ("sil", 120, -70), ("tone", 300, 0.3),
           ("sil", 320, -60), ("tone", 500, 0.4), ("sil", 700, -55), ("tone", 200, 0.2),
           ("sil", 1000, -np.inf), ("tone", 350, 0.5), ("sil", 299, -80), ("tone", 150, 0.4),
           ("sil", 301, -75), ("tone", 260, 0.1), ("sil", 330, -62)]


def _near_threshold() -> np.ndarray:
    # Noise bursts whose 10 ms / 300 ms RMS sits right around -50 and -40 dBFS.
    layout = [("tone", 200, 0.3)]
    for db in (-49.8, -50.0, -50.2, -40.1, -39.9, -50.05, -49.95):
        layout += [("sil", 400, db), ("tone", 120, 0.2)]
    return _build(11, 24000, layout, extra=20)


def _long(seed: int, gaps: list[float], total_s: float = 25.0, sr: int = 24000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    layout: list[tuple[str, float, float]] = [("sil", 300, -70)]
    used = 0.3
    i = 0
    while used < total_s:
        speech = float(rng.uniform(700, 2500))
        layout.append(("tone", speech, 0.4))
        gap = gaps[i % len(gaps)]
        layout.append(("sil", gap, -60))
        used += (speech + gap) / 1000
        i += 1
    return _build(seed, sr, layout)


CASES: dict[str, tuple[np.ndarray, int]] = {
    "speechy_24k": (_build(1, 24000, SPEECHY, extra=13), 24000),
    "odd_44k": (_build(2, 44100, SPEECHY[:9], extra=35), 44100),
    "stereo_22k": (_build(3, 22050, SPEECHY[:11], channels=2, extra=15), 22050),
    "near_thresh_24k": (_near_threshold(), 24000),
    "no_silence_16k": (_build(4, 16000, [("tone", 1500, 0.5)]), 16000),
    "all_silent_48k": (_build(5, 48000, [("sil", 1300, -70)]), 48000),
    "short_16k": (_build(6, 16000, [("sil", 40, -80), ("tone", 110, 0.5)], extra=9), 16000),
    "edges_24k": (_build(7, 24000, [("sil", 1200, -60), ("tone", 600, 0.5), ("sil", 900, -58)], extra=18),
                  24000),
    "clipped_24k": (_build(8, 24000, [("sil", 200, -70), ("tone", 500, 1.6), ("sil", 400, -70)]), 24000),
}
LONG_CASES: dict[str, tuple[np.ndarray, int]] = {
    "long_gaps_24k": (_long(9, [400, 150, 90, 600]), 24000),
    "long_tight_24k": (_long(10, [60, 80]), 24000),  # no gap reaches 100 ms: cut at 15 s
    "long_early_24k": (_build(12, 24000, [("tone", 1500, 0.4), ("sil", 500, -60), ("tone", 22000, 0.4)]),
                       24000),
}


def _jobs() -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    jobs: list[dict[str, Any]] = []
    arrays: dict[str, np.ndarray] = {}

    def add(fn: str, inputs: list[str], args: list[Any] | None = None, **kwargs: Any) -> None:
        jobs.append({"id": f"{fn}-{len(jobs)}-{inputs[0] if inputs else ''}", "fn": fn, "inputs": inputs,
                     "args": args or [], "kwargs": kwargs})

    for name, (x, sr) in CASES.items():
        arrays[name] = x
        add("segment_roundtrip", [name], [sr])
        add("segment_len", [name], [sr])
        add("dbfs_chunks", [name], [sr, 10])
        seg_len = len(Segment.from_float(x, sr))
        starts = list(range(0, seg_len, 37)) + [seg_len - 1, seg_len, seg_len + 5]
        add("rms_windows", [name],
            [sr, starts, [s + w for s, w in zip(starts, [1, 10, 100, 300] * len(starts))]])
        for start, end in ((0, 10), (37, 381), (len(Segment.from_float(x, sr)) - 3, 10**6), (250, 120)):
            add("slice", [name], [sr, start, end])
        for kw in ({"min_silence_len": 300, "silence_thresh": -50, "seek_step": 10},
                   {"min_silence_len": 100, "silence_thresh": -40, "seek_step": 10},
                   {"min_silence_len": 200, "silence_thresh": -45, "seek_step": 7},
                   {"min_silence_len": 1000, "silence_thresh": -16, "seek_step": 1}):
            add("detect_silence", [name], [sr], **kw)
            add("detect_nonsilent", [name], [sr], **kw)
        for kw in ({"silence_threshold": -50.0, "chunk_size": 10},
                   {"silence_threshold": -40.0, "chunk_size": 10},
                   {"silence_threshold": -50.0, "chunk_size": 7}):
            add("detect_leading_silence", [name], [sr], **kw)
            add("detect_trailing_silence", [name], [sr], **kw)
        for kw in ({"min_silence_len": 300, "silence_thresh": -50, "keep_silence": 300, "seek_step": 10},
                   {"min_silence_len": 300, "silence_thresh": -50, "keep_silence": True, "seek_step": 10},
                   {"min_silence_len": 200, "silence_thresh": -45, "keep_silence": False, "seek_step": 10},
                   {"min_silence_len": 150, "silence_thresh": -50, "keep_silence": 50, "seek_step": 1}):
            add("split_on_silence", [name], [sr], **kw)
        for kw in ({"lead_sil": 100, "trail_sil": 300},
                   {"lead_sil": 0, "trail_sil": 0, "silence_threshold": -40}):
            add("remove_silence_edges", [name], [sr], **kw)
        for kw in ({}, {"mid_sil": 200, "lead_sil": 100, "trail_sil": 200},
                   {"mid_sil": 500, "lead_sil": 100, "trail_sil": 100}, {"mid_sil": 0}):
            add("remove_silence", [name], [sr], **kw)
        add("trim_long_audio", [name], [sr])
        add("fade_and_pad", [name], [], sample_rate=sr)
        add("fade_and_pad", [name], [], pad_duration=0.05, fade_duration=0.2, sample_rate=sr)
    for name, (x, sr) in LONG_CASES.items():
        arrays[name] = x
        add("trim_long_audio", [name], [sr])
        add("trim_long_audio", [name], [sr], max_duration=10.0, min_duration=2.0, trim_threshold=12.0)
        add("detect_nonsilent", [name], [sr], min_silence_len=100, silence_thresh=-40, seek_step=10)
        add("remove_silence", [name], [sr], mid_sil=200, lead_sil=100, trail_sil=200)

    # fades and joins
    rng = np.random.default_rng(20)
    arrays["tiny"] = rng.normal(0, 0.3, (1, 5)).astype(np.float32)
    arrays["empty"] = np.zeros((1, 0), np.float32)
    arrays["st_a"] = rng.normal(0, 0.3, (2, 9000)).astype(np.float32)
    arrays["st_b"] = rng.normal(0, 0.3, (2, 4000)).astype(np.float32)
    arrays["st_c"] = rng.normal(0, 0.3, (2, 1000)).astype(np.float32)
    arrays["mono_a"] = rng.normal(0, 0.3, (1, 30000)).astype(np.float32)
    arrays["mono_b"] = rng.normal(0, 0.3, (1, 100)).astype(np.float32)
    arrays["mono_c"] = rng.normal(0, 0.3, (1, 20000)).astype(np.float32)
    for name in ("tiny", "empty", "mono_b"):
        add("fade_and_pad", [name], [], sample_rate=24000)
    add("cross_fade_chunks", ["mono_a"], [24000])
    add("cross_fade_chunks", ["mono_a", "mono_b", "mono_c"], [24000])
    add("cross_fade_chunks", ["mono_a", "mono_c"], [16000], silence_duration=0.5)
    add("cross_fade_chunks", ["st_a", "st_b", "st_c"], [24000])
    add("cross_fade_chunks", ["mono_b", "mono_b"], [24000])

    # the resampler (rate pairs of the brief, several lengths and batch shapes)
    pairs = [(16000, 24000), (24000, 16000), (24000, 44100), (44100, 24000), (16000, 48000),
             (48000, 16000), (22050, 24000), (24000, 22050), (8000, 24000), (24000, 8000),
             (44100, 16000), (48000, 24000)]
    arrays["rs_mono"] = rng.standard_normal((1, 24011)).astype(np.float32)
    arrays["rs_batch"] = rng.standard_normal((2, 3, 4801)).astype(np.float32)
    arrays["rs_short"] = rng.standard_normal((1, 7)).astype(np.float32)
    for a, b in pairs:
        add("resample", ["rs_mono"], [a, b])
    for a, b in pairs[:4]:
        add("resample", ["rs_batch"], [a, b])
        add("resample", ["rs_short"], [a, b])
    return jobs, arrays


JOBS, ARRAYS = _jobs()
JOB_BY_ID = {job["id"]: job for job in JOBS}

# --------------------------------------------------------------------------- our side


def run_ours(job: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    fn = job["fn"]
    xs = [arrays[name] for name in job["inputs"]]
    args, kw = job["args"], job["kwargs"]
    if fn == "resample":
        return resample(xs[0], *args)
    if fn == "segment_roundtrip":
        return Segment.from_float(xs[0], args[0]).to_float()
    if fn == "segment_len":
        return len(Segment.from_float(xs[0], args[0]))
    if fn == "slice":
        sr, start, end = args
        return Segment.from_float(xs[0], sr)[start:end].to_float()
    if fn == "dbfs_chunks":
        seg = Segment.from_float(xs[0], args[0])
        return [[c.rms, c.dBFS] for c in (seg[i:i + args[1]] for i in range(0, len(seg), args[1]))]
    if fn in ("detect_silence", "detect_nonsilent", "detect_leading_silence"):
        return getattr(silence, fn)(Segment.from_float(xs[0], args[0]), **kw)
    if fn == "rms_windows":
        sr, starts, ends = args
        return Segment.from_float(xs[0], sr).window_rms(np.array(starts), np.array(ends)).tolist()
    if fn == "detect_trailing_silence":
        return silence.detect_leading_silence(Segment.from_float(xs[0], args[0]).reverse(), **kw)
    if fn == "split_on_silence":
        return [s.to_float() for s in silence.split_on_silence(Segment.from_float(xs[0], args[0]), **kw)]
    if fn == "remove_silence_edges":
        return silence.remove_silence_edges(Segment.from_float(xs[0], args[0]), **kw).to_float()
    if fn == "remove_silence":
        return silence.remove_silence(xs[0], *args, **kw)
    if fn == "trim_long_audio":
        return silence.trim_long_audio(xs[0], *args, **kw)
    if fn == "fade_and_pad":
        return dsp.fade_and_pad(xs[0], **kw)
    if fn == "cross_fade_chunks":
        return dsp.cross_fade_chunks([x.copy() for x in xs], *args, **kw)
    raise AssertionError(fn)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("audio-parity")
    (work / "jobs.json").write_text(json.dumps(JOBS))
    np.savez(work / "inputs.npz", **ARRAYS)
    report = run_reference("torchaudio", REFERENCE / "audio_jobs.py", work / "jobs.json", work / "inputs.npz",
                           work / "outputs.npz")
    return {"results": report["results"], "arrays": dict(np.load(work / "outputs.npz"))}


def _expected(upstream: dict[str, Any], job_id: str) -> Any:
    meta = upstream["results"][job_id]
    if isinstance(meta, dict) and "array" in meta:
        return upstream["arrays"][job_id]
    if isinstance(meta, dict) and "arrays" in meta:
        return [upstream["arrays"][f"{job_id}/{i}"] for i in range(meta["arrays"])]
    return meta


def _assert_same(ours: Any, theirs: Any, job_id: str) -> None:
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), job_id
        assert ours.shape == theirs.shape, (job_id, ours.shape, theirs.shape)
        assert ours.dtype == theirs.dtype, (job_id, ours.dtype, theirs.dtype)
        assert np.array_equal(ours, theirs), (job_id, float(np.abs(ours - theirs).max()))
    elif isinstance(theirs, list) and theirs and isinstance(theirs[0], np.ndarray):
        assert len(ours) == len(theirs), (job_id, len(ours), len(theirs))
        for a, b in zip(ours, theirs):
            _assert_same(a, b, job_id)
    else:
        # JSON turns -inf into -Infinity and back; tuples into lists.
        assert json.loads(json.dumps(ours)) == theirs, job_id


@pytest.mark.parametrize("job_id", [job["id"] for job in JOBS if job["fn"] != "resample"])
def test_matches_pydub_and_omnivoice(upstream: dict[str, Any], job_id: str) -> None:
    job = JOB_BY_ID[job_id]
    _assert_same(run_ours(job, ARRAYS), _expected(upstream, job_id), job_id)


@pytest.mark.parametrize("job_id", [job["id"] for job in JOBS if job["fn"] == "resample"])
def test_resample_matches_torchaudio(upstream: dict[str, Any], job_id: str) -> None:
    job = JOB_BY_ID[job_id]
    theirs = _expected(upstream, job_id)
    ours = run_ours(job, ARRAYS)
    assert ours.shape == theirs.shape
    diff = float(np.abs(ours - theirs).max()) if ours.size else 0.0
    assert diff <= 1e-5, (job_id, diff)
    assert np.array_equal(ours, theirs), f"{job_id}: within 1e-5 but not bit-exact (max diff {diff})"
    # The tensor path gives the same numbers.
    tensor = resample(torch.from_numpy(ARRAYS[job["inputs"][0]]), *job["args"])
    assert np.array_equal(tensor.numpy(), theirs)


def test_cases_exercise_every_branch(upstream: dict[str, Any]) -> None:
    """The signals are not degenerate: some cuts happen, some ranges merge, trims differ."""
    results = upstream["results"]
    nonsilent = [v for k, v in results.items() if k.startswith("detect_nonsilent")]
    assert any(len(v) >= 4 for v in nonsilent) and any(v == [] for v in nonsilent)
    trims = {k: _expected(upstream, k).shape[-1] for k in results
             if k.startswith("trim_long_audio") and "long" in k}
    assert len(set(trims.values())) >= 3, trims
    lead = [v for k, v in results.items() if k.startswith("detect_leading_silence")]
    assert len(set(lead)) >= 5


def test_load_audio_matches_upstream(tmp_path: Path) -> None:
    """read_audio + resample == OmniVoice's load_audio (stereo 24-bit 44.1 kHz file -> 24 kHz)."""
    rng = np.random.default_rng(3)
    stereo = (rng.standard_normal((44100 + 17, 3)) * 0.2).astype(np.float32)
    path = tmp_path / "in.wav"
    sf.write(path, stereo, 44100, subtype="PCM_24")
    jobs = [{"id": "load", "fn": "load_audio", "inputs": [], "args": [str(path), 24000], "kwargs": {}}]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    np.savez(tmp_path / "inputs.npz", unused=np.zeros(1))
    run_reference("torchaudio", REFERENCE / "audio_jobs.py", tmp_path / "jobs.json", tmp_path / "inputs.npz",
                  tmp_path / "out.npz")
    theirs = np.load(tmp_path / "out.npz")["load"]
    buffer = read_audio(path)
    ours = resample(buffer.samples[np.newaxis, :], buffer.sample_rate, 24000)
    assert theirs.shape == ours.shape == (1, 24000 + 10)
    assert np.array_equal(ours, theirs)
