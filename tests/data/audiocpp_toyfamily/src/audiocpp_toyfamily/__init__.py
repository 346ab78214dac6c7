"""A third-party audiocpp family: installed separately, found through the entry point.

It has the shape every family has (docs/adding-a-family.md), with the files it needs:
``config`` (config.json), ``model`` (the network: a bank of tones), ``weights``
(``load_parts``), ``session`` (the loaded model and the session). It has no codec, prompt or
separate decoding loop. This module imports nothing heavy, as the plugin contract asks.
"""

from __future__ import annotations

from pathlib import Path

from audiocpp.engine.plugin import FamilyPlugin


class ToyTonePlugin(FamilyPlugin):
    name = "toytone"
    spec_file = Path(__file__).with_name("toytone.json")

    def _load(self, path, options):
        from .session import ToneLoadedModel
        from .weights import load_parts

        return ToneLoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))


plugin = ToyTonePlugin()
