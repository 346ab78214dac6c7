"""The toy model's config (``config.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from audiocpp.engine.plugin_api import ModelError


@dataclass(frozen=True)
class ToneConfig:
    seconds_per_char: float = 0.02

    @classmethod
    def from_file(cls, path: Path) -> ToneConfig:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(seconds_per_char=float(raw.get("seconds_per_char", cls.seconds_per_char)))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise ModelError(f"cannot read the toy config {path}: {exc}",
                             hint="config.json holds an object such as "
                                  "{\"seconds_per_char\": 0.02}") from None
