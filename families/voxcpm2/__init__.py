"""The ``voxcpm2`` family plugin. Light on purpose: model code is imported in ``_load``.

Module map (read top to bottom): ``config`` (typed config.json, the v1/v2 ``Variant``
switches), ``model/`` (the generator network ``VoxCPMModel``: ``minicpm`` MiniCPM4 stacks with
LongRoPE and a static KV cache, ``locenc`` / ``locdit`` / ``cfm`` the local encoder, local DiT
and flow-matching solver, ``fsq`` FSQ and the stop head), ``codec`` (AudioVAE v1/v2, streaming
decoder), ``prompt`` (tokenizer, prompt layouts), ``generate`` (AR loop, retries, decoding,
streaming), ``weights`` (tensor adapters, ``load_parts``), ``session`` (loaded model,
task/option mapping). The ``voxcpm1`` family is a variant built on these modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.loaded_model import LoadedModel


class VoxCPM2Plugin(FamilyPlugin):
    name = "voxcpm2"

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        from .session import VoxCPM2LoadedModel
        from .weights import load_parts

        return VoxCPM2LoadedModel(self.spec, path, options, load_parts(path, options, spec=self.spec))


plugin = VoxCPM2Plugin()
