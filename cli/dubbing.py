"""``--srt FILE``: dub subtitles, each cue's speech in its time slot of one timeline.

Each cue is synthesized as its own request with the run's flags (voice, language, seed...); with
a cloned voice (``--task clon --voice-ref`` / ``--voice-prompt``) the reference is prepared once
and reused by every cue. Fitting a cue into its slot (start to end):

- a family with duration control (a request option ``duration``, in seconds: OmniVoice) is asked
  for exactly the slot's length;
- whatever comes out (a family without it, or one whose post-processing pads: OmniVoice adds
  0.1 s of silence at each end) is then fitted: audio shorter than the slot is followed by
  silence; audio longer than the slot first loses leading, then trailing silence (below -60 dBFS),
  and what is still too long is time-compressed to the slot, pitch kept (a phase vocoder,
  :mod:`engine.audio.stretch`), with a warning past 1.5x.

The timeline starts at 0 and ends with the last cue; it is silent outside the cues. One line
per cue on stderr:
``cue=N start_s= slot_s= audio_s= fit=padded|trimmed Ns of silence|compressed xR``. In
streaming mode with ``--out -`` the timeline is written to stdout cue by cue.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from audiocpp.engine.errors import AudiocppWarning, UsageError
from audiocpp.engine.progress import Progress
from audiocpp.engine.records import AudioBuffer, TaskRequest, TaskResult
from audiocpp.engine.session import Session
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.text.srt import Cue

from .pipes import AudioOutput, merge_results

DURATION_OPTION = "duration"
WARN_RATIO = 1.5


def has_duration_control(spec: ModelSpec) -> bool:
    return any(row.name == DURATION_OPTION for row in spec.options.request)


def check_dubbing(spec: ModelSpec, request_options: dict[str, Any]) -> None:
    """Before loading: ``duration`` is the slot's, not the user's, when dubbing."""
    if has_duration_control(spec) and DURATION_OPTION in request_options:
        raise UsageError(f"--srt sets the request option {DURATION_OPTION!r} of each cue to its slot",
                         hint=f"drop --request-option {DURATION_OPTION}=...")


SILENCE = 1e-3  # -60 dBFS


def fit(samples: np.ndarray, rate: int, length: int) -> tuple[np.ndarray, str]:
    """``samples`` in exactly ``length`` samples: padded with silence; or trimmed of leading
    (the speech then starts with the cue), then trailing silence; then time-compressed."""
    from audiocpp.engine.audio.stretch import time_stretch

    samples = np.asarray(samples, dtype=np.float32)
    if len(samples) <= length:
        return np.concatenate([samples, np.zeros(length - len(samples), np.float32)]), "padded"
    loud = np.flatnonzero(np.abs(samples) > SILENCE)
    lead, trail = (int(loud[0]), len(samples) - 1 - int(loud[-1])) if len(loud) else (len(samples), 0)
    excess = len(samples) - length
    cut_lead = min(lead, excess)
    cut_trail = min(trail, excess - cut_lead)
    trimmed = samples[cut_lead:len(samples) - cut_trail]
    if len(trimmed) <= length:
        return trimmed, f"trimmed {excess / rate:.3f}s of silence"
    return time_stretch(trimmed, rate, length), f"compressed x{len(trimmed) / length:.2f}"


def dub(session: Session, request: TaskRequest, cues: list[Cue], output: AudioOutput, *,
        progress: Progress, timeout: float | None = None) -> TaskResult:
    """The timeline of ``cues`` at the session's rate, as one result (each cue's audio a chunk);
    ``timeout``: the seconds each cue may take (its job's deadline)."""
    from audiocpp.engine.execution.watch import watched

    rate = session.sample_rate
    timeline = np.zeros(round(cues[-1].end * rate), np.float32)
    control = has_duration_control(session.spec)
    results: list[TaskResult] = []
    pieces: list[AudioBuffer] = []
    streamed = 0
    for cue in cues:
        options = dict(request.options)
        if control:
            options[DURATION_OPTION] = cue.duration
        with watched(session.submit(replace(request, text=cue.text, options=options), progress=progress,
                                    deadline_s=timeout)) as job:
            result = job.result()
        start, end = round(cue.start * rate), round(cue.end * rate)
        audio = result.audio.samples
        if result.audio.sample_rate != rate:
            from audiocpp.engine.audio.resample import resample

            audio = resample(audio, result.audio.sample_rate, rate)
        fitted, how = fit(audio, rate, end - start)
        if how.startswith("compressed") and len(audio) > WARN_RATIO * (end - start):
            warnings.warn(f"cue {cue.number}: its speech ({len(audio) / rate:.2f} s) is "
                          f"{len(audio) / (end - start):.1f}x its slot ({cue.duration:.2f} s), compressed "
                          "to fit; lengthen the cue or shorten its text", AudiocppWarning, stacklevel=2)
        timeline[start:end] = fitted
        print(f"cue={cue.number} start_s={cue.start:.3f} slot_s={cue.duration:.3f} "
              f"audio_s={len(audio) / rate:.3f} fit={how}", file=sys.stderr)
        if output.streams:
            output.piece(AudioBuffer(timeline[streamed:end], rate))
            streamed = end
        results.append(result)
        pieces.append(AudioBuffer(fitted, rate))
    merged = merge_results(results) if len(results) > 1 else results[0]
    final = AudioBuffer(timeline, rate)
    metrics = replace(merged.metrics, audio_s=final.duration, num_chunks=len(cues))
    return replace(merged, audio=final, chunks=pieces, metrics=metrics,
                   details={"cues": [{"number": c.number, "start": c.start, "end": c.end, "text": c.text}
                                     for c in cues], "results": [r.details for r in results]})
