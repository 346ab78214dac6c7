"""The work folder beside the output: every finished chunk's audio, the narrator's voice, the
assembled chapters, and what a later run needs to go on (the book's seed, the measured speed).

Files are named by a hash of everything that makes them (a chunk: its text, voice, model, options
and seed; a chapter: its chunks, pauses and mastering), written to a temporary name and renamed
into place complete, so a file that is there is whole and a re-run after Ctrl-C, a crash or an
edit synthesizes only what is missing or changed. One run at a time holds the folder (a lock).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine.errors import AudiocppError, UsageError

STATE = "book.json"
FORMAT_VERSION = 1


def digest(value: Any) -> str:
    """sha256 of a JSON-able value (sorted keys: the same value, the same digest)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_samples(path: Path, samples: np.ndarray, rate: int) -> None:
    """``samples`` to ``path`` atomically: FLAC (24-bit) when they fit in [-1, 1], else a float WAV
    beside it (the other of the two removed)."""
    import soundfile as sf

    samples = np.asarray(samples, dtype=np.float32)
    if not np.isfinite(samples).all():
        raise AudiocppError(
            "the model returned NaN or infinite samples",
            hint="this is a bug in the model or its options; please report it",
        )
    lossless = samples.size == 0 or float(np.abs(samples).max()) <= 1.0
    target = path.with_suffix(".flac" if lossless else ".wav")
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        if samples.size == 0:
            sf.write(tmp, samples, rate, format="WAV", subtype="FLOAT")
            target = path.with_suffix(".wav")
        elif lossless:
            sf.write(tmp, samples, rate, format="FLAC", subtype="PCM_24")
        else:
            sf.write(tmp, samples, rate, format="WAV", subtype="FLOAT")
        os.replace(tmp, target)
    except OSError as error:
        raise AudiocppError(
            f"cannot write {str(target)!r}: {error.strerror or error}",
            hint="check the free space and permissions of the work folder",
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    other = path.with_suffix(".wav" if target.suffix == ".flac" else ".flac")
    other.unlink(missing_ok=True)


def read_samples(path: Path) -> tuple[np.ndarray, int] | None:
    """The samples stored under ``path`` (either suffix), or None when there are none (or they are
    damaged: such a file is removed and made again)."""
    import soundfile as sf

    for candidate in (path.with_suffix(".flac"), path.with_suffix(".wav")):
        if candidate.is_file():
            try:
                data, rate = sf.read(candidate, dtype="float32", always_2d=False)
            except (RuntimeError, OSError, sf.LibsndfileError):
                candidate.unlink(missing_ok=True)
                return None
            return np.asarray(data, dtype=np.float32).reshape(-1), int(rate)
    return None


def _word_entry(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= 3
        and isinstance(value[0], str)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value[1:3])
    )


class WorkDir:
    """The work folder of one output (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        if path.exists() and not path.is_dir():
            raise UsageError(f"the work folder {str(path)!r} is a file", hint="pass another --work-dir")
        try:
            for sub in ("chunks", "voice", "chapters"):
                (path / sub).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the work folder {str(path)!r}: {error.strerror or error}",
                hint="pass a --work-dir you can write to",
            ) from None
        self.path = path
        self._lock: Any = None
        self.state: dict[str, Any] = self._read_state()

    # -- the lock ----------------------------------------------------------------------------------------
    def lock(self) -> None:
        import fcntl

        handle = open(self.path / "lock", "a")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise UsageError(
                f"another `audiocpp book` run is using the work folder {str(self.path)!r}",
                hint="wait for it to finish (or stop it), or pass another --work-dir",
            ) from None
        self._lock = handle

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def remove_temporaries(self) -> None:
        """What a killed run left half-written (never a finished file)."""
        for tmp in self.path.rglob(".*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()

    # -- state -------------------------------------------------------------------------------------------
    def _read_state(self) -> dict[str, Any]:
        try:
            state = json.loads((self.path / STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"format_version": FORMAT_VERSION}
        return state if isinstance(state, dict) else {"format_version": FORMAT_VERSION}

    def save_state(self) -> None:
        tmp = self.path / f".{STATE}.{secrets.token_hex(6)}.tmp"
        try:
            tmp.write_text(json.dumps(self.state, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path / STATE)
        finally:
            tmp.unlink(missing_ok=True)

    # -- chunks, voices, chapters ------------------------------------------------------------------------
    def chunk(self, key: str) -> Path:
        return self.path / "chunks" / key[:2] / key

    def has_chunk(self, key: str) -> bool:
        base = self.chunk(key)
        return base.with_suffix(".flac").is_file() or base.with_suffix(".wav").is_file()

    def write_chunk(self, key: str, samples: np.ndarray, rate: int) -> None:
        base = self.chunk(key)
        base.parent.mkdir(exist_ok=True)
        write_samples(base, samples, rate)

    def read_chunk(self, key: str) -> tuple[np.ndarray, int] | None:
        return read_samples(self.chunk(key))

    def words(self, key: str) -> Path:
        """A chunk's timed words (families that time words), written before its audio."""
        return self.chunk(key).with_name(f"{key}.words.json")

    def write_words(self, key: str, words: list[list[Any]]) -> None:
        """``[[text, start_s, end_s, phonemes], ...]`` (seconds in the chunk's audio), atomically."""
        dest = self.words(key)
        dest.parent.mkdir(exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.tmp")
        try:
            tmp.write_text(json.dumps(words, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, dest)
        except OSError as error:
            raise AudiocppError(
                f"cannot write {str(dest)!r}: {error.strerror or error}",
                hint="check the free space and permissions of the work folder",
            ) from None
        finally:
            tmp.unlink(missing_ok=True)

    def read_words(self, key: str) -> list[list[Any]] | None:
        """A chunk's timed words, or None (none were timed, or the file is damaged)."""
        try:
            words = json.loads(self.words(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(words, list) or not all(_word_entry(w) for w in words):
            return None
        return words

    def voice(self, key: str) -> Path:
        """The narrator's reference audio (a float WAV the engine reads as --voice-ref)."""
        return self.path / "voice" / f"{key}.wav"

    def chapter(self, key: str) -> Path:
        return self.path / "chapters" / key

    def read_chapter(self, key: str) -> tuple[np.ndarray, int, dict[str, Any]] | None:
        stored = read_samples(self.chapter(key))
        try:
            meta = json.loads(self.chapter(key).with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if stored is None:
            return None
        return stored[0], stored[1], meta

    def write_chapter(self, key: str, samples: np.ndarray, rate: int, meta: dict[str, Any]) -> Path:
        base = self.chapter(key)
        write_samples(base, samples, rate)
        tmp = base.with_name(f".{base.name}.json.{secrets.token_hex(6)}.tmp")
        try:
            tmp.write_text(json.dumps(meta), encoding="utf-8")
            os.replace(tmp, base.with_suffix(".json"))
        finally:
            tmp.unlink(missing_ok=True)
        return self.chapter_file(key)

    def chapter_file(self, key: str) -> Path:
        base = self.chapter(key)
        flac = base.with_suffix(".flac")
        return flac if flac.is_file() else base.with_suffix(".wav")
