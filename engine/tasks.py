"""The task and mode vocabulary, defined once.

Specs use ``tts``, ``clone`` and ``design``; the CLI also accepts audio.cpp's spellings
``clon`` and ``vdes``.
"""

from __future__ import annotations

from enum import Enum

from .errors import UsageError


class Task(str, Enum):
    TTS = "tts"
    CLONE = "clone"
    DESIGN = "design"

    @property
    def cli_name(self) -> str:
        return CLI_NAMES[self]


class Mode(str, Enum):
    OFFLINE = "offline"
    STREAMING = "streaming"


CLI_NAMES = {Task.TTS: "tts", Task.CLONE: "clon", Task.DESIGN: "design"}
_TASK_ALIASES = {
    "tts": Task.TTS,
    "clon": Task.CLONE,
    "clone": Task.CLONE,
    "design": Task.DESIGN,
    "vdes": Task.DESIGN,
}


def parse_task(value: str | Task) -> Task:
    if isinstance(value, Task):
        return value
    task = _TASK_ALIASES.get(str(value).strip().lower())
    if task is None:
        raise UsageError(
            f"unknown task {value!r}",
            hint="use one of: tts, clon (voice cloning), design (voice design)",
        )
    return task


def parse_mode(value: str | Mode) -> Mode:
    if isinstance(value, Mode):
        return value
    try:
        return Mode(str(value).strip().lower())
    except ValueError:
        raise UsageError(f"unknown mode {value!r}", hint="use 'offline' or 'streaming'") from None
