"""The ``voxcpm1`` family plugin (OpenBMB VoxCPM-0.5B and VoxCPM1.5). Light on purpose: model
code is imported in ``_load``.

A variant family: VoxCPM1 runs on the VoxCPM2 family's modules, configured by ``config.json``
(architecture ``voxcpm`` selects the v1 switches of ``voxcpm2.config.Variant``); this package has
the variant's subset of the family shape: ``config`` (GGUF metadata -> config), ``weights`` (every
VoxCPM1 layout: HF folders, packages, VoxCPM.cpp GGUFs through a tensor adapter; ``load_parts``)
and ``session`` (the v1 request mapping).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.detect import STRENGTH_CONFIG, Evidence, PathFacts
from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.loaded_model import LoadedModel


class VoxCPM1Plugin(FamilyPlugin):
    name = "voxcpm1"
    #: Q8_0 VoxCPM-0.5B on AVX-512 with AMX: 1.06-1.10 s a request (16 patches) in float32-stored
    #: (its blocks in one kernel call each, engine.nn.layers.q8_block) against 1.40-1.42 s in bfloat16, and
    #: 4.78 s against 5.36 s for a batch of 8, every row still its lone bits (docs/performance.md)
    cpu_bf16_for_quantized = False

    def detect(self, facts: PathFacts) -> Evidence | None:
        """Spec-driven, plus upstream's default: a VoxCPM ``config.json`` without ``architecture``
        is a VoxCPM1 model (``VoxCPM.__init__`` reads ``config.get("architecture", "voxcpm")``)."""
        found = super().detect(facts)
        config = facts.config
        if (found is None or found.strength < STRENGTH_CONFIG) and facts.folder is not None \
                and isinstance(config, dict) and "architecture" not in config \
                and isinstance(config.get("lm_config"), dict) and "dit_config" in config:
            return Evidence(self.name, STRENGTH_CONFIG,
                            "VoxCPM config.json without 'architecture' (upstream: voxcpm)")
        return found

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import VoxCPM1LoadedModel
        from .weights import load_parts

        parts = load_parts(path, options, spec=self.spec, bf16_for_quantized=self.cpu_bf16_for_quantized)
        return VoxCPM1LoadedModel(self.spec, path, options, parts)


plugin = VoxCPM1Plugin()
