"""The ``voxcpm2`` family plugin. Light on purpose: model code is imported in ``_load``."""

from __future__ import annotations

from audiocpp.engine.plugin import FamilyPlugin


class VoxCPM2Plugin(FamilyPlugin):
    name = "voxcpm2"


plugin = VoxCPM2Plugin()
