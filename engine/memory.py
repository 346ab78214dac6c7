"""Handing the heap memory that loading freed back to the operating system."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys


@functools.cache
def _malloc_trim():  # noqa: ANN202 - a ctypes function or None
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def return_freed_memory() -> None:
    """Loading frees large temporaries (casts, dequantized and requantized copies); glibc keeps
    much of that in its heap (its mmap threshold rises as large blocks are freed), where it
    would count in the loaded model's RSS. ``malloc_trim(0)`` returns it: 0.58 GiB after loading
    the VoxCPM2-sized Q8_0 package. A no-op where the C library has no ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
