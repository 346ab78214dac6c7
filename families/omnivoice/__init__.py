"""The ``omnivoice`` family plugin. Light on purpose: model code is imported in ``_load``."""

from __future__ import annotations

from audiocpp.engine.plugin import FamilyPlugin


class OmniVoicePlugin(FamilyPlugin):
    name = "omnivoice"


plugin = OmniVoicePlugin()
