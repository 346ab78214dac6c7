"""The ``voxcpm2`` family plugin. Light on purpose: model code is imported in ``_load``.

Module map (read top to bottom): ``config`` (typed config.json, the v1/v2 ``Variant``
switches), ``minicpm`` (MiniCPM4 stacks, LongRoPE, static KV cache), ``locenc`` / ``locdit`` /
``cfm`` (local encoder, local DiT, flow-matching solver), ``fsq`` (FSQ, stop head),
``audiovae`` (AudioVAE v1/v2, streaming decoder), ``model`` (the generator network),
``generate`` (AR loop, retries, decoding, streaming), ``prompt`` (tokenizer, prompt layouts),
``convert`` (tensor adapters, loading), ``session`` (task/option mapping).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.plugin import FamilyPlugin

if TYPE_CHECKING:
    from audiocpp.engine.model import LoadedModel


class VoxCPM2Plugin(FamilyPlugin):
    name = "voxcpm2"

    def _load(self, path: Path | None, options: dict[str, Any]) -> LoadedModel:
        from audiocpp.engine.errors import UsageError

        from .convert import load_parts
        from .session import VoxCPM2Model

        if path is None:
            raise UsageError("voxcpm2 needs a model path", hint="pass --model VoxCPM2/ or a voxcpm2 .gguf")
        parts = load_parts(self.spec, path)
        return VoxCPM2Model(self.spec, path, parts, options)


plugin = VoxCPM2Plugin()
