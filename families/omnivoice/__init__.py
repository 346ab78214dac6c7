"""The ``omnivoice`` family plugin. Light on purpose: model code is imported in ``_load``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.model import LoadedModel


class OmniVoicePlugin(FamilyPlugin):
    name = "omnivoice"

    def _load(self, path: Path | None, options: dict[str, Any]) -> LoadedModel:
        from .loader import load_model

        if path is None:
            path = self.demo_model_path()
        return load_model(self.spec, path, options)

    def demo_model_path(self) -> Path | None:
        """A deterministic tiny random-weight checkpoint, built on first use and cached
        (``$AUDIOCPP_CACHE_DIR/demo/omnivoice-<version>/``): the pipeline runs, the audio is not speech."""
        from .demo import demo_checkpoint

        return demo_checkpoint()


plugin = OmniVoicePlugin()
