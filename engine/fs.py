"""Path checks that never raise, and an atomic text write.

In Python 3.10/3.11 ``Path.exists()``, ``is_file()`` and ``is_dir()`` raise ``OSError`` for a
name the system refuses (a component over 255 bytes: ENAMETOOLONG; a folder that may not be
entered: EACCES) and ``ValueError`` for a NUL byte. A path given by a user (a flag, a manifest
line, an option) is checked with these instead: such a path is simply not there, and the
caller's "does not exist" message follows.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def _mode(path: str | os.PathLike[str]) -> int | None:
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None


def exists(path: str | os.PathLike[str]) -> bool:
    return _mode(path) is not None


def is_file(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path)
    return mode is not None and stat.S_ISREG(mode)


def is_dir(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


__all__ = ["Path", "exists", "is_dir", "is_file"]


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """``text`` (UTF-8) becomes ``path`` whole or not at all: written beside it, then renamed over it."""
    import tempfile

    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
