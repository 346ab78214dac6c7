"""Word timings out of a run: ``--captions FILE.srt|.vtt`` (a cue per word) and ``--timestamps FILE.json``.

Only families whose spec has the ``word_timestamps`` capability time their words (Kokoro); asking another
is refused before the model loads.
"""

from __future__ import annotations

from pathlib import Path

from audiocpp.engine.errors import UsageError
from audiocpp.engine.fs import write_text_atomic
from audiocpp.engine.records import TaskResult
from audiocpp.engine.spec.model_spec import ModelSpec

from .checks import check_out_file

CAPTION_SUFFIXES = (".srt", ".vtt")


def check_word_outputs(captions: Path | None, timestamps: Path | None) -> None:
    """The paths are writable and of a known kind (before anything runs)."""
    if captions is not None:
        if captions.suffix.lower() not in CAPTION_SUFFIXES:
            raise UsageError(f"--captions {str(captions)!r} must end in .srt or .vtt",
                             hint="e.g. --captions out.srt (SubRip) or --captions out.vtt (WebVTT)")
        check_out_file(captions, "--captions")
    if timestamps is not None:
        check_out_file(timestamps, "--timestamps")


def check_family_times_words(spec: ModelSpec, captions: Path | None, timestamps: Path | None) -> None:
    if captions is None and timestamps is None:
        return
    if "word_timestamps" not in (spec.capabilities.get("tts") or []):
        flag = "--captions" if captions is not None else "--timestamps"
        raise UsageError(f"{spec.family} does not time its words, so {flag} has nothing to write",
                         hint="word timings come from families with the word_timestamps capability "
                         "(kokoro); `audiocpp families --json` lists capabilities")


def write_word_outputs(result: TaskResult, captions: Path | None, timestamps: Path | None) -> list[Path]:
    from audiocpp.engine.text.captions import captions_text, timestamps_json

    written: list[Path] = []
    if captions is not None:
        write_text_atomic(captions, captions_text(result.words, captions.suffix))
        written.append(captions)
    if timestamps is not None:
        write_text_atomic(timestamps, timestamps_json(result.audio.duration, result.audio.sample_rate,
                                                      result.words))
        written.append(timestamps)
    return written
