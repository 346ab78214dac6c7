"""The ``voxcpm1`` family plugin. Light on purpose: model code is imported in ``_load``."""

from __future__ import annotations

from audiocpp.engine.plugin import FamilyPlugin


class VoxCPM1Plugin(FamilyPlugin):
    name = "voxcpm1"


plugin = VoxCPM1Plugin()
