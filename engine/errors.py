"""The one exception family for problems a user can cause.

Every message says what is wrong and what to do about it. The CLI prints ``str(error)``
without a traceback and exits with ``error.exit_code``: 2 for usage errors (bad flags,
options, text), 1 for runtime errors (unreadable files, models that do not load).
"""

from __future__ import annotations


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
