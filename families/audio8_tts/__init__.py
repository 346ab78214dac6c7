"""The ``audio8_tts`` family plugin. Light on purpose: model code is imported in ``_load``."""

from __future__ import annotations

from audiocpp.engine.plugin import FamilyPlugin


class Audio8TtsPlugin(FamilyPlugin):
    name = "audio8_tts"


plugin = Audio8TtsPlugin()
