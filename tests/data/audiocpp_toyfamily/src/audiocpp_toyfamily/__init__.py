"""A third-party audiocpp family: installed separately, found through the entry point.

It imports nothing heavy at module level, as the plugin contract asks.
"""

from __future__ import annotations

from pathlib import Path

from audiocpp.engine.plugin import FamilyPlugin


class ToyTonePlugin(FamilyPlugin):
    name = "toytone"
    spec_file = Path(__file__).with_name("toytone.json")

    def _load(self, path, options):
        from .model import ToneModel

        return ToneModel.load(self.spec, path, options)


plugin = ToyTonePlugin()
