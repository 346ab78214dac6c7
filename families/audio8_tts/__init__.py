"""The ``audio8_tts`` family plugin. Light on purpose: model code is imported in ``_load``.

Module map (read top to bottom): ``config`` (typed config.json), ``model/`` (the slow-AR
interface, the 0.6B Qwen slow AR, the 0.1B Falcon-H1 slow AR, the fast AR), ``codec/`` (the
44.1 kHz codec, streaming decoder), ``prompt`` (prompt layout, text chunks), ``generate`` (the
DualAR loop, sampling, RAS), ``weights`` (layouts, adapters, ``load_parts``), ``session``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.loaded_model import LoadedModel


class Audio8TtsPlugin(FamilyPlugin):
    name = "audio8_tts"
    #: Q8_0 0.6B on AVX-512 with AMX: 5.25 s a request in float32-stored against 5.9 s in bfloat16,
    #: and 17.8 s against 19.9 s for a batch of 8 (docs/performance.md)
    cpu_bf16_for_quantized = False

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import Audio8LoadedModel
        from .weights import load_parts

        parts = load_parts(self.spec, path, options, bf16_for_quantized=self.cpu_bf16_for_quantized)
        return Audio8LoadedModel(self.spec, path, parts, options)


plugin = Audio8TtsPlugin()
