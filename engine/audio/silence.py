"""pydub 0.25.1's silence functions and OmniVoice's silence handling, without pydub.

The pydub functions take and return ``Segment``s and milliseconds exactly as pydub does
(same windows, same integer RMS, same dBFS comparisons, same merging of ranges), computed
with cumulative sums instead of one ``audioop`` call per window. ``remove_silence`` and
``trim_long_audio`` take float ``(C, T)`` audio like OmniVoice's and return float32 ``(C, T')``
audio that went through int16 and back exactly as upstream's does.
"""

from __future__ import annotations

import numpy as np

from .segment import MAX_POSSIBLE_AMPLITUDE, Segment, db_to_float, rms_to_dbfs


def detect_silence(seg: Segment, min_silence_len: int = 1000, silence_thresh: float = -16,
                   seek_step: int = 1) -> list[list[int]]:
    """Silent ``[start, end]`` ranges in ms: windows of ``min_silence_len`` ms every ``seek_step``
    ms whose RMS is at most ``silence_thresh`` dBFS, overlapping ones merged."""
    seg_len = len(seg)
    if seg_len < min_silence_len:
        return []
    threshold = db_to_float(silence_thresh) * MAX_POSSIBLE_AMPLITUDE
    last_start = seg_len - min_silence_len
    starts = list(range(0, last_start + 1, seek_step))
    if last_start % seek_step:
        starts.append(last_start)
    starts_arr = np.asarray(starts, dtype=np.int64)
    rms = seg.window_rms(starts_arr, starts_arr + min_silence_len)
    silence_starts = starts_arr[rms <= threshold].tolist()
    if not silence_starts:
        return []
    ranges: list[list[int]] = []
    prev = silence_starts[0]
    range_start = prev
    for start in silence_starts[1:]:
        continuous = start == prev + seek_step
        has_gap = start > prev + min_silence_len
        if not continuous and has_gap:
            ranges.append([range_start, prev + min_silence_len])
            range_start = start
        prev = start
    ranges.append([range_start, prev + min_silence_len])
    return ranges


def detect_nonsilent(seg: Segment, min_silence_len: int = 1000, silence_thresh: float = -16,
                     seek_step: int = 1) -> list[list[int]]:
    """The complement of ``detect_silence`` in ms (``[]`` when all silent)."""
    silent = detect_silence(seg, min_silence_len, silence_thresh, seek_step)
    seg_len = len(seg)
    if not silent:
        return [[0, seg_len]]
    if silent[0][0] == 0 and silent[0][1] == seg_len:
        return []
    ranges: list[list[int]] = []
    prev_end = 0
    for start, end in silent:
        ranges.append([prev_end, start])
        prev_end = end
    if silent[-1][1] != seg_len:
        ranges.append([prev_end, seg_len])
    if ranges[0] == [0, 0]:
        ranges.pop(0)
    return ranges


def split_on_silence(seg: Segment, min_silence_len: int = 1000, silence_thresh: float = -16,
                     keep_silence: int | bool = 100, seek_step: int = 1) -> list[Segment]:
    """Non-silent pieces, each with up to ``keep_silence`` ms of its surrounding silence
    (a shorter gap is shared at its midpoint; ``True`` keeps all, ``False`` none)."""
    if isinstance(keep_silence, bool):
        keep_silence = len(seg) if keep_silence else 0
    ranges = [[start - keep_silence, end + keep_silence]
              for start, end in detect_nonsilent(seg, min_silence_len, silence_thresh, seek_step)]
    for left, right in zip(ranges, ranges[1:]):
        if right[0] < left[1]:
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    seg_len = len(seg)
    return [seg[max(start, 0):min(end, seg_len)] for start, end in ranges]


def detect_leading_silence(seg: Segment, silence_threshold: float = -50.0, chunk_size: int = 10) -> int:
    """Milliseconds before the first ``chunk_size`` ms chunk at or above ``silence_threshold`` dBFS."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    seg_len = len(seg)
    starts = np.arange(0, seg_len, chunk_size, dtype=np.int64)
    if starts.size == 0:
        return 0
    rms = seg.window_rms(starts, starts + chunk_size)
    quiet = _below_threshold(rms, silence_threshold)
    loud = np.flatnonzero(~quiet)
    trim = int(starts[loud[0]]) if loud.size else int(starts[-1]) + chunk_size
    return min(trim, seg_len)


def _below_threshold(rms: np.ndarray, threshold: float) -> np.ndarray:
    """``dBFS(rms) < threshold`` with pydub's own float operations, once per distinct RMS."""
    values, inverse = np.unique(rms, return_inverse=True)
    verdicts = np.array([rms_to_dbfs(int(v)) < threshold for v in values], dtype=bool)
    return verdicts[inverse.reshape(-1)]


def remove_silence_edges(seg: Segment, lead_sil: int = 100, trail_sil: int = 300,
                         silence_threshold: float = -50) -> Segment:
    """Trim leading / trailing silence, keeping ``lead_sil`` / ``trail_sil`` ms of it."""
    start = max(0, detect_leading_silence(seg, silence_threshold=silence_threshold) - lead_sil)
    seg = seg[start:].reverse()
    start = max(0, detect_leading_silence(seg, silence_threshold=silence_threshold) - trail_sil)
    return seg[start:].reverse()


def remove_silence(audio: np.ndarray, sample_rate: int, mid_sil: int = 300, lead_sil: int = 100,
                   trail_sil: int = 300) -> np.ndarray:
    """OmniVoice's ``remove_silence``: shorten inner silences longer than ``mid_sil`` ms to
    ``mid_sil`` ms (0: leave them) and trim the edges to ``lead_sil`` / ``trail_sil`` ms, at
    -50 dBFS. Returns float32 ``(C, T')``; ``(1, 0)`` when everything is silent, as upstream.

    Upstream joins the pieces onto pydub's 11025 Hz ``silent(0)``, which resamples audio
    below 11025 Hz to 11025 Hz without saying so; here the rate is always kept.
    """
    seg = Segment.from_float(audio, sample_rate)
    if mid_sil > 0:
        pieces = split_on_silence(seg, min_silence_len=mid_sil, silence_thresh=-50,
                                  keep_silence=mid_sil, seek_step=10)
        # Upstream adds the pieces one by one onto pydub's empty silent(0); one concatenation
        # gives the same samples (all pieces share the segment's rate and channels).
        if pieces:
            seg = Segment(np.concatenate([piece.samples for piece in pieces]), seg.frame_rate, seg.channels)
        else:
            seg = Segment.silent(duration=0)
    return remove_silence_edges(seg, lead_sil, trail_sil, -50).to_float()


def trim_long_audio(audio: np.ndarray, sample_rate: int, max_duration: float = 15.0,
                    min_duration: float = 3.0, trim_threshold: float = 20.0) -> np.ndarray:
    """OmniVoice's ``trim_long_audio``: audio longer than ``trim_threshold`` s is cut at the start
    of the last non-silent stretch (-40 dBFS, 100 ms) that begins by ``max_duration`` s, or at
    ``max_duration`` s when that is before ``min_duration`` s. Shorter audio is returned as is."""
    if audio.shape[-1] / sample_rate <= trim_threshold:
        return audio
    seg = Segment.from_float(audio, sample_rate)
    nonsilent = detect_nonsilent(seg, min_silence_len=100, silence_thresh=-40, seek_step=10)
    if not nonsilent:
        return audio
    max_ms = int(max_duration * 1000)
    min_ms = int(min_duration * 1000)
    best = 0
    for start, end in nonsilent:
        if best < start <= max_ms:
            best = start
        if end > max_ms:
            break
    if best < min_ms:
        best = min(max_ms, len(seg))
    return seg[:best].to_float()


__all__ = [
    "Segment",
    "detect_leading_silence",
    "detect_nonsilent",
    "detect_silence",
    "remove_silence",
    "remove_silence_edges",
    "split_on_silence",
    "trim_long_audio",
]
