"""engine.audio: resampler API, Segment semantics, silence edge cases and DSP helpers
(the numbers themselves are compared with upstream in test_audio_parity.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audiocpp.engine.audio import dsp, silence
from audiocpp.engine.audio.resample import resample, sinc_resample_kernel
from audiocpp.engine.audio.segment import Segment, float_to_int16

# --------------------------------------------------------------------------- resample


def test_resample_shapes_dtypes_and_identity() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 1000)).astype(np.float64)
    y = resample(x, 16000, 24000)
    assert isinstance(y, np.ndarray) and y.dtype == np.float64 and y.shape == (2, 3, 1500)
    assert resample(x, 16000, 16000) is x
    t = torch.zeros(5, 441)
    assert resample(t, 44100, 44100) is t
    assert resample(t, 44100.0, 16000).shape == (5, 160)


def test_resample_errors() -> None:
    with pytest.raises(TypeError):
        resample(torch.zeros(10, dtype=torch.int16), 16000, 24000)
    with pytest.raises(ValueError):
        resample(torch.zeros(10), 16000.5, 24000)
    with pytest.raises(ValueError):
        resample(torch.zeros(10), 0, 24000)


def test_kernel_is_cached_per_rate_pair_and_dtype() -> None:
    sinc_resample_kernel.cache_clear()
    x = torch.randn(100)
    resample(x, 24000, 16000)
    resample(x, 24000, 16000)
    resample(x.double(), 24000, 16000)
    info = sinc_resample_kernel.cache_info()
    assert (info.hits, info.misses) == (1, 2)
    kernel, width = sinc_resample_kernel(24000, 16000)
    assert kernel.shape == (2, 1, 2 * width + 3)


def test_resample_preserves_a_tone() -> None:
    sr = 16000
    t = np.arange(sr) / sr
    x = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    y = resample(x, sr, 24000)
    t2 = np.arange(24000) / 24000
    ref = np.sin(2 * np.pi * 440 * t2)
    assert np.abs(y[200:-200] - ref[200:-200]).max() < 2e-3


# --------------------------------------------------------------------------- Segment


def test_float_to_int16_truncates_and_clips() -> None:
    x = np.array([[0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 1.5 / 32768, -1.5 / 32768]], np.float32)
    assert float_to_int16(x).tolist() == [[0, 16384, -16384, 32767, -32768, 32767, -32768, 1, -1]]


def test_segment_length_slicing_and_padding() -> None:
    seg = Segment(np.arange(1, 24014, dtype=np.int16), 24000)  # 24013 frames = 1000.54 ms
    assert len(seg) == 1001
    tail = seg[990:]
    assert tail.frame_count == 11 * 24  # padded with zero frames up to 1001 ms
    assert tail.samples[-11:].tolist() == [0] * 11
    assert seg[500:400].frame_count == 0
    assert seg[-10:].frame_count == 240
    assert round(1000 * 2.5) == 2500 and len(Segment(np.zeros(20, np.int16), 8000)) == 2  # 2.5 ms -> 2
    with pytest.raises(TypeError):
        seg[::2]


def test_segment_reverse_swaps_channels_like_audioop() -> None:
    stereo = Segment(np.array([1, 2, 3, 4, 5, 6], np.int16), 8000, 2)
    assert stereo.reverse().samples.tolist() == [6, 5, 4, 3, 2, 1]
    assert stereo.reverse().reverse().samples.tolist() == stereo.samples.tolist()


def test_segment_rms_dbfs() -> None:
    seg = Segment(np.array([3, -4, 0, 0], np.int16), 8000)
    assert seg.rms == 2  # int(sqrt(25 / 4))
    assert seg.dBFS == pytest.approx(20 * np.log10(2 / 32768))
    assert Segment(np.zeros(0, np.int16), 8000).dBFS == -np.inf


def test_window_rms_equals_slicing() -> None:
    rng = np.random.default_rng(5)
    seg = Segment(rng.integers(-3000, 3000, 2 * 22061).astype(np.int16), 22050, 2)
    starts = rng.integers(0, len(seg) + 5, 400)
    ends = starts + rng.integers(0, 400, 400)
    expected = [seg[int(s):int(e)].rms for s, e in zip(starts, ends)]
    assert seg.window_rms(starts, ends).tolist() == expected


def test_segment_join() -> None:
    mono = Segment(np.array([1, 2], np.int16), 24000)
    stereo = Segment(np.array([5, 6, 7, 8], np.int16), 24000, 2)
    assert (Segment.silent(0) + stereo).samples.tolist() == [5, 6, 7, 8]
    assert (mono + stereo).samples.tolist() == [1, 1, 2, 2, 5, 6, 7, 8]
    with pytest.raises(ValueError):
        mono + Segment(np.array([1], np.int16), 16000)


# --------------------------------------------------------------------------- silence


def _speech(sr: int) -> np.ndarray:
    t = np.arange(int(0.4 * sr)) / sr
    tone = 0.5 * np.sin(2 * np.pi * 200 * t)
    gap = np.zeros(int(0.8 * sr))
    return np.concatenate([gap, tone, gap, tone, gap])[np.newaxis].astype(np.float32)


def test_remove_silence_shortens_gaps() -> None:
    x = _speech(24000)
    y = silence.remove_silence(x, 24000)
    assert y.dtype == np.float32 and y.shape[0] == 1
    # 0.1 s lead + tone + <= 0.3 s kept on each side of the gap + tone + 0.3 s trail
    assert 0.8 * 24000 + 0.3 * 24000 < y.shape[1] < x.shape[1] - 0.8 * 24000


def test_remove_silence_below_11025_hz_keeps_the_rate() -> None:
    # Upstream would silently resample to 11025 Hz here (pydub's silent(0) join); we do not.
    x = _speech(8000)
    y = silence.remove_silence(x, 8000)
    ref = silence.remove_silence(_speech(16000), 16000)
    assert abs(y.shape[1] / 8000 - ref.shape[1] / 16000) < 0.02


def test_remove_silence_all_silent_is_empty_mono() -> None:
    assert silence.remove_silence(np.zeros((2, 24000), np.float32), 24000).shape == (1, 0)
    # Without the inner pass nothing empties it: lead_sil ms of the silence are kept.
    assert silence.remove_silence(np.zeros((2, 24000), np.float32), 24000, mid_sil=0).shape == (2, 2400)


def test_trim_long_audio_leaves_short_audio_alone() -> None:
    x = _speech(16000)
    assert silence.trim_long_audio(x, 16000) is x


# --------------------------------------------------------------------------- dsp


def test_peak_normalize() -> None:
    x = np.array([[0.1, -0.4, 0.2]], np.float32)
    y = dsp.peak_normalize(x)
    assert np.array_equal(y, x / np.abs(x).max() * 0.5) and y.dtype == np.float32
    quiet = np.full((1, 4), 1e-7, np.float32)
    assert dsp.peak_normalize(quiet) is quiet
    empty = np.zeros((1, 0), np.float32)
    assert dsp.peak_normalize(empty) is empty


def test_rms_and_rms_normalize() -> None:
    x = np.random.default_rng(2).normal(0, 0.02, (1, 5000)).astype(np.float32)
    r = dsp.rms(x)
    assert r == float(np.sqrt(np.mean(x**2)))
    up = dsp.rms_normalize(x, 0.1, r)
    assert np.array_equal(up, x * 0.1 / r) and up.dtype == np.float32
    assert dsp.rms(dsp.rms_normalize(x, 0.1)) == pytest.approx(0.1, rel=1e-5)
    zeros = np.zeros((1, 10), np.float32)
    assert dsp.rms_normalize(zeros, 0.1) is zeros
    assert dsp.rms(np.zeros((1, 0), np.float32)) == 0.0


def test_cross_fade_chunks_single_and_empty() -> None:
    a = np.ones((1, 100), np.float32)
    assert dsp.cross_fade_chunks([a], 24000) is a
    with pytest.raises(ValueError):
        dsp.cross_fade_chunks([], 24000)


def test_cross_fade_chunks_layout_and_inputs_untouched() -> None:
    a = np.ones((1, 10000), np.float32)
    b = np.ones((1, 10000), np.float32)
    out = dsp.cross_fade_chunks([a, b], 24000)
    assert out.shape == (1, 20000 + 2400)
    assert np.all(out[0, 10000:12400] == 0)
    assert out[0, 9999] == 0 and out[0, 12400] == 0 and out[0, 7599] == 1
    assert np.all(a == 1) and np.all(b == 1)


def test_fade_and_pad() -> None:
    x = np.ones((2, 24000), np.float32)
    y = dsp.fade_and_pad(x)
    assert y.shape == (2, 24000 + 4800)
    assert np.all(y[:, :2400] == 0) and np.all(y[:, -2400:] == 0)
    assert y[0, 2400] == 0 and y[0, 2400 + 1200] == pytest.approx(1200 / 2399)
    assert np.all(x == 1)
