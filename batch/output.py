"""The output folder: audio files written atomically and ``manifest.jsonl``, the record of rows.

Only the driving process writes here. An item's audio is renamed into place complete before
its row is appended (one line, flushed and synced), so after a crash or Ctrl-C a row that says
``ok`` always has its whole file; a file without such a row is simply redone. Rows are appended
while the job runs and the file is rewritten at the end (atomically) with one row per item,
the last one, in the manifest's order.

Where the family times its words (Kokoro), each item's words go to ``<stem>.words.json`` beside its
audio (the JSON of ``audiocpp --timestamps``: ``sample_rate``, ``duration_s``, ``words``: ``word``,
``start``, ``end`` in seconds, ``phonemes``), written before the row, which names it (``words``).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.audio.io import write_audio
from audiocpp.engine.errors import AudiocppError, UsageError
from audiocpp.engine.records import AudioBuffer, WordTiming

from .manifest import MANIFEST_OUT, Item
from .synth import describe, error_row

ROW_KEYS = ("id", "status", "error", "output", "audio_s", "wall_s", "rtf", "seed", "words")


@dataclass
class Tally:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    audio_s: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The last row of every id in a manifest.jsonl; a torn last line (a crash) is ignored."""
    rows: dict[str, dict[str, Any]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            rows[row["id"]] = row
    return rows


class OutputDir:
    """Where one batch job writes; knows which items an earlier run already finished."""

    def __init__(self, folder: Path) -> None:
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out-dir {str(folder)!r} is a file",
                             hint="pass a folder (it is created if missing)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"cannot create --out-dir {str(folder)!r}: {error.strerror or error}") from None
        if not os.access(folder, os.W_OK):
            raise UsageError(f"--out-dir {str(folder)!r} is not writable", hint="check its permissions")
        self.folder = folder
        self.path = folder / MANIFEST_OUT
        self.rows = read_rows(self.path)
        self.tally = Tally()

    def finished(self, item: Item) -> bool:
        """An earlier run wrote this item: its last row says ok, for this file, and the file exists."""
        row = self.rows.get(item.id)
        return (row is not None and row.get("status") == "ok" and row.get("output") == item.out
                and (self.folder / item.out).is_file()
                and (not row.get("words") or (self.folder / str(row["words"])).is_file()))

    def remove_stale_temporaries(self, items: list[Item]) -> None:
        """Temporary files a killed run left for these items' outputs (never a finished file)."""
        for item in items:
            for name in (item.out, item.words_out):
                for tmp in self.folder.glob(f".{name}.*.tmp"):
                    tmp.unlink(missing_ok=True)

    def record(self, item: Item, row: dict[str, Any], audio: AudioBuffer | None,
               words: list[WordTiming] | None = None) -> dict[str, Any]:
        """Write the item's audio and its words (atomically), then append its row; returns the row kept."""
        row = {**row, "words": None}
        if row["status"] == "ok" and audio is not None:
            try:
                write_audio(self.folder / item.out, audio, item.fmt)
                if words:
                    self.write_words(item, audio, words)
                    row["words"] = item.words_out
            except AudiocppError as error:
                row = {**error_row(item, describe(error), row.get("wall_s")), "seed": row.get("seed")}
        elif row["status"] == "ok":
            row = error_row(item, "internal error: the worker sent no audio")
        self.append(row)
        if row["status"] == "ok":
            self.tally.done += 1
            self.tally.audio_s += float(row["audio_s"] or 0.0)
        else:
            self.tally.failed += 1
            self.tally.failures.append((item.id, str(row["error"])))
        return row

    def write_words(self, item: Item, audio: AudioBuffer, words: list[WordTiming]) -> None:
        from audiocpp.engine.fs import write_text_atomic
        from audiocpp.engine.text.captions import timestamps_json

        text = timestamps_json(audio.duration, audio.sample_rate, words)
        try:
            write_text_atomic(self.folder / item.words_out, text)
        except OSError as error:
            raise AudiocppError(f"cannot write {item.words_out!r}: {error.strerror or error}",
                                hint="check the free space and permissions of --out-dir") from None

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps({key: row.get(key) for key in ROW_KEYS}, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        self.rows[row["id"]] = row

    def compact(self, items: list[Item]) -> None:
        """Rewrite manifest.jsonl with one row per id: the manifest's items in order, then others."""
        if not self.path.exists():
            return
        rows = read_rows(self.path)
        order = [item.id for item in items if item.id in rows]
        listed = set(order)
        order += [key for key in rows if key not in listed]
        text = "".join(json.dumps({k: rows[key].get(k) for k in ROW_KEYS}, ensure_ascii=False) + "\n"
                       for key in order)
        tmp = self.folder / f".{MANIFEST_OUT}.{secrets.token_hex(6)}.tmp"
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
