"""RIFF/WAVE headers: the one writer of a mono header (the CLI's stdout and the server's streams), and a
look at a file's header: is its data chunk cut short?

libsndfile silently reads what is left of a WAV whose data chunk is shorter than its header
declares; we would rather say that the file is damaged. Streaming writers that cannot go
back to fill in the sizes leave 0 or 0xFFFFFFFF there; those are not taken as truncation.
"""

from __future__ import annotations

import struct
from pathlib import Path

_PLACEHOLDER_SIZES = {0, 0xFFFFFFFF, 0x7FFFFFFF}
#: the size a stream of unknown length declares (players read until the end of the stream)
UNKNOWN_SIZE = 0xFFFFFFFF
#: format tags: integer PCM, IEEE float
PCM, IEEE_FLOAT = 1, 3


def wav_header(rate: int, *, tag: int = PCM, width: int = 2, num_samples: int | None = None) -> bytes:
    """A 44-byte mono WAV header (``width`` bytes a sample); ``num_samples=None``: a stream of unknown
    length (its sizes :data:`UNKNOWN_SIZE`)."""
    data = UNKNOWN_SIZE if num_samples is None else num_samples * width
    riff = UNKNOWN_SIZE if num_samples is None else 36 + data
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVE" + b"fmt "
            + struct.pack("<IHHIIHH", 16, tag, 1, rate, rate * width, width, 8 * width)
            + b"data" + struct.pack("<I", data))


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
