"""A third-party audiocpp family: installed separately, found through the entry point.

It has the shape every family has (docs/adding-a-family.md walks through it file by file):
``config`` (config.json), ``model`` (the network: a bank of tones), ``weights`` (``load_parts``),
``session`` (the loaded model and the session), ``demo`` (the checkpoint used without --model).
It has no codec, prompt or separate decoding loop. This module imports nothing heavy, as the
plugin contract asks: ``audiocpp families`` imports it to read the spec.
"""

from __future__ import annotations

from pathlib import Path

from audiocpp.engine.plugin_api import FamilyPlugin


class ToyTonePlugin(FamilyPlugin):
    name = "toytone"
    spec_file = Path(__file__).with_name("toytone.json")

    def _load(self, path, options):
        from .session import ToneLoadedModel
        from .weights import load_parts

        return ToneLoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))

    def demo_model_path(self) -> Path:
        from .demo import demo_checkpoint

        return demo_checkpoint()


plugin = ToyTonePlugin()
