"""Tensor adapters: every supported layout -> the module names of ``model.py`` / ``codec``.

- k2-fsa/OmniVoice snapshot and our package GGUF (the same names): the LM drops the
  ``codebook_layer_offsets`` buffer (rebuilt from the config); the codec folds the HuBERT
  positional conv's weight norm (``parametrizations.weight.original0/1``, dim 2) and any DAC
  weight norm (dim 0), and drops what inference never uses (``decoder_semantic``, ``fc1``,
  the RVQ training statistics).
- omnivoice.cpp's GGUFs: the same names with those tensors already skipped and the
  positional conv already folded (``v * g / ||v||`` over dims 0 and 1); the same ops are
  no-ops there. GGUF's reversed dims are undone by the GGUF reader.
"""

from __future__ import annotations

import re

from audiocpp.engine.weights.adapters import AdaptedSource, Drop, FoldWeightNorm, adapt
from audiocpp.engine.weights.source import TensorSource

LM_DROP = ("codebook_layer_offsets",)
CODEC_DROP = (
    "decoder_semantic.*",
    "fc1.*",
    "quantizer.quantizers.*.codebook.cluster_size",
    "quantizer.quantizers.*.codebook.embed_avg",
    "quantizer.quantizers.*.codebook.inited",
    "semantic_model.masked_spec_embed",
)
_QUANTIZER = re.compile(r"^quantizer\.quantizers\.(\d+)\.codebook\.embed$")


def lm_source(source: TensorSource) -> AdaptedSource:
    return adapt(source, [Drop(*LM_DROP)])


def codec_source(source: TensorSource) -> AdaptedSource:
    return adapt(source, [
        FoldWeightNorm(prefix="semantic_model.encoder.pos_conv_embed.", dim=2),
        FoldWeightNorm(prefix="acoustic_", dim=0),
        Drop(*CODEC_DROP),
    ])


def count_quantizers(source: TensorSource) -> int:
    """The RVQ depth of a codec checkpoint (omnivoice.cpp's GGUF does not store the bandwidths)."""
    return sum(1 for name in source.names() if _QUANTIZER.match(name))
