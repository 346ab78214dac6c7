"""A look at a RIFF/WAVE header: is the data chunk cut short?

libsndfile silently reads what is left of a WAV whose data chunk is shorter than its header
declares; we would rather say that the file is damaged. Streaming writers that could not go
back to fill in the sizes leave 0 or 0xFFFFFFFF there; those are not taken as truncation.
"""

from __future__ import annotations

import struct
from pathlib import Path

_PLACEHOLDER_SIZES = {0, 0xFFFFFFFF, 0x7FFFFFFF}


def declared_wav_truncation(path: Path) -> tuple[int, int] | None:
    """``(declared, present)`` data bytes when ``path`` is a RIFF WAVE cut short, else None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            offset = 12
            while offset + 8 <= size:
                handle.seek(offset)
                chunk = handle.read(8)
                if len(chunk) < 8:
                    return None
                chunk_id, chunk_size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                body = offset + 8
                if chunk_id == b"data":
                    present = size - body
                    if chunk_size in _PLACEHOLDER_SIZES or chunk_size <= present:
                        return None
                    return chunk_size, present
                offset = body + chunk_size + (chunk_size & 1)
    except OSError:
        return None
    return None
