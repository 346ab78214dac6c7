"""The ``omnivoice`` family plugin. Light on purpose: model code is imported in ``_load``.

Module map: ``config`` (typed configs), ``model`` (the Qwen3 LM with audio embeddings and
heads), ``codec/`` (Higgs Audio v2 tokenizer: DAC, HuBERT, RVQ), ``prompt`` (text, languages,
instructions, the prompt layout), ``voice`` (saved voice prompts), ``generate`` (MaskGIT),
``weights`` (layouts, tensor adapters, ``load_parts``), ``session`` (loaded model, request
mapping), ``demo`` (the no-``--model`` checkpoint); data: ``languages``, ``tiny_tokenizer``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.loaded_model import LoadedModel


class OmniVoicePlugin(FamilyPlugin):
    name = "omnivoice"
    #: On the CPU a MaskGIT step is compute-bound already alone (its backbone runs every position of
    #: both rows), so merging requests gains nothing: 0.99x (AVX2) to 1.03-1.10x (AVX-512) at 4-8
    #: requests, for 4-8x each request's latency (docs/batching.md). One at a time there.
    max_batch = {"cpu": 1, "cuda": 8, "mps": 8}

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import OmniVoiceLoadedModel
        from .weights import load_parts

        return OmniVoiceLoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))

    def demo_model_path(self) -> Path | None:
        """A deterministic tiny random-weight checkpoint, built on first use and cached
        (``$AUDIOCPP_CACHE_DIR/demo/omnivoice-<version>/``): the pipeline runs, the audio is not speech."""
        from .demo import demo_checkpoint

        return demo_checkpoint()


plugin = OmniVoicePlugin()
