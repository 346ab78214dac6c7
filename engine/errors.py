"""The one exception family for problems a user can cause.

Every message says what is wrong and what to do about it. The CLI prints ``str(error)``
without a traceback and exits with ``error.exit_code``: 2 for usage errors (bad flags,
options, text), 1 for runtime errors (unreadable files, models that do not load).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


class AudiocppError(Exception):
    """Base class: a problem the user can fix. ``hint`` says how."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  hint: {hint}")


class UsageError(AudiocppError):
    """Bad command line, option, value or text (exit code 2)."""

    exit_code = 2


class SpecError(AudiocppError):
    """A model spec does not validate; the message carries the JSON path."""


class ModelError(AudiocppError):
    """A model path that cannot be detected, read or loaded (missing/unexpected tensors...)."""


class AudioError(AudiocppError):
    """Audio that cannot be read, decoded or written."""


class FamilyUnavailableError(UsageError):
    """The family exists but its spec status says it cannot run yet."""


class AudiocppWarning(UserWarning):
    """Something the engine changed or ignored for the user (e.g. a reference audio it cut);
    the CLI prints these on stderr as ``warning: ...``."""


# CLI spellings in messages and hints -> what a Python caller of ``load()`` passes instead.
_PYTHON_WORDING: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"`audiocpp options --family (\w+)`", r"`audiocpp.engine.get_family('\1').spec.options`"),
    (r"`audiocpp families`", "`audiocpp.engine.families()`"),
    (r"the CLI option --codec / load option codec", "load option 'codec'"),
    (r"the --model path", "the path given to load()"),
    (r"--model PATH", "load(PATH)"),
    (r"--model ([\w.*-]*[/.][\w./*-]*)", r"load('\1')"),
    (r"--model", "the path given to load()"),
    (r"--family (NAME|\w+)", r"family='\1'"),
    (r"--family", "family=NAME"),
    (r"--codec ([\w.*-]*[/.][\w./*-]*)", r"load_options={'codec': '\1'}"),
    (r"--codec", "load option 'codec'"),
    (r"--load-option (\w+)=", r"load_options={'\1': ...}"),
    (r"--load-option", "load_options"),
))


def python_wording(error: AudiocppError) -> AudiocppError:
    """``error`` reworded in place for a Python caller: CLI flags become the arguments of ``load()``."""

    def reword(text: str | None) -> str | None:
        if text is None:
            return None
        for pattern, replacement in _PYTHON_WORDING:
            text = pattern.sub(replacement, text)
        return text

    error.message = reword(error.message) or ""
    error.hint = reword(error.hint)
    error.args = (error.message if not error.hint else f"{error.message}\n  hint: {error.hint}",)
    return error


def did_you_mean(name: str, choices: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> str:
    """``"did you mean 'x'? "`` (or ``'x' or 'y'``) for the choices close to a mistyped ``name``, else
    ``""``: the start of a hint."""
    close = difflib.get_close_matches(name, list(choices), n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
