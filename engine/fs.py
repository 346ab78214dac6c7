"""Path checks that never raise.

In Python 3.10/3.11 ``Path.exists()``, ``is_file()`` and ``is_dir()`` raise ``OSError`` for a
name the system refuses (a component over 255 bytes: ENAMETOOLONG; a folder that may not be
entered: EACCES) and ``ValueError`` for a NUL byte. A path given by a user (a flag, a manifest
line, an option) is checked with these instead: such a path is simply not there, and the
caller's "does not exist" message follows.
"""

from __future__ import annotations

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
