"""Loading OmniVoice from any of its three layouts: tensor adapters and :func:`load_parts`.

Layouts (the spec's ``sources`` say where each piece lives):

- (a) a k2-fsa/OmniVoice snapshot folder (root + ``audio_tokenizer/``);
- (b) omnivoice.cpp's two GGUFs, the LM as ``--model`` and the codec as ``--codec`` (load option
  ``codec``) or found next to it (``omnivoice-tokenizer*.gguf``);
- (c) our package GGUF (namespaces ``weights/`` and ``audio_tokenizer_weights/`` with the config
  and tokenizer files embedded).

Tensor adapters, every layout -> the module names of ``model.py`` / ``codec``:

- snapshot and package (the same names): the LM drops the ``codebook_layer_offsets`` buffer
  (rebuilt from the config); the codec folds the HuBERT positional conv's weight norm
  (``parametrizations.weight.original0/1``, dim 2) and any DAC weight norm (dim 0), and drops
  what inference never uses (``decoder_semantic``, ``fc1``, the RVQ training statistics);
- omnivoice.cpp's GGUFs: the same names with those tensors already skipped and the positional
  conv already folded (``v * g / ||v||`` over dims 0 and 1); the same ops are no-ops there.
  GGUF's reversed dims are undone by the GGUF reader.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.device import ComputeMode, auto_compute_mode, compute_mode, device_of
from audiocpp.engine.errors import ModelError, UsageError
from audiocpp.engine.nn.build import load_on_meta
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.weights.adapters import AdaptedSource, Drop, FoldWeightNorm, Reshape, adapt
from audiocpp.engine.weights.resolve import ResolvedWeights, resolve_weights
from audiocpp.engine.weights.source import TensorSource

from .codec import HiggsAudioV2Codec
from .config import CodecConfig, OmniVoiceConfig, parse_configs
from .model import OmniVoiceLM

LM_ARCH = "omnivoice-lm"
CODEC_ARCH = "omnivoice-tokenizer"
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


#: The LM's linear layers a Q8_0 / Q4_0 package keeps quantized in a compute mode that keeps weights
#: stored: the Qwen3 blocks and the audio heads (engine.nn.linear.choice picks their layer).
QUANTIZED_LINEARS = ("llm.layers.*", "audio_heads")
#: Lookup tables kept in the dtype they are stored in under any compute dtype: their rows are
#: summed in float32 before the backbone's dtype (OmniVoiceLM.embed), as float32 tables would give.
STORED_TABLES = ("llm.embed_tokens.weight", "audio_embeddings.weight")


@dataclass
class OmniVoiceParts:
    """A loaded OmniVoice: the LM in the default compute mode (``compute_dtype=auto``) and the
    float32 codec on the load device, the text tokenizer, the output rate."""

    config: OmniVoiceConfig
    lm: OmniVoiceLM
    codec: HiggsAudioV2Codec
    tokenizer: Any  # tokenizers.Tokenizer
    sample_rate: int
    source_id: str
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    compute: ComputeMode = field(default_factory=lambda: compute_mode("float32"))
    #: loads the LM again in another compute mode (``OmniVoiceLoadedModel.lm_for``)
    load_lm: Any = None


# -- tensor adapters -----------------------------------------------------------------------
def lm_source(source: TensorSource) -> AdaptedSource:
    return adapt(source, [Drop(*LM_DROP)])


def codec_source(source: TensorSource) -> AdaptedSource:
    return adapt(source, [
        FoldWeightNorm(prefix="semantic_model.encoder.pos_conv_embed.", dim=2),
        FoldWeightNorm(prefix="acoustic_", dim=0),
        Drop(*CODEC_DROP),
        # omnivoice.cpp's quantize (ggml's GGUF writer) stores ggml_n_dims dims, dropping leading
        # unit PyTorch dims: Snake alphas (1, C, 1) come back (C, 1), the (1, C, K) output conv (C, K).
        Reshape("*.alpha", lambda s: (1, s[0], 1) if len(s) == 2 and s[1] == 1 else s),
        Reshape("acoustic_decoder.conv2.weight", lambda s: (1, *s) if len(s) == 2 else s),
    ])


def count_quantizers(source: TensorSource) -> int:
    """The RVQ depth of a codec checkpoint (omnivoice.cpp's GGUF does not store the bandwidths)."""
    return sum(1 for name in source.names() if _QUANTIZER.match(name))


# -- layouts -------------------------------------------------------------------------------
def _gguf_architecture(path: Path) -> str | None:
    from audiocpp.engine.weights.gguf_file import is_gguf, read_gguf_metadata

    if not path.is_file() or not is_gguf(path):
        return None
    return read_gguf_metadata(path).get("general.architecture")


def find_codec(lm_path: Path) -> Path | None:
    """The ``omnivoice-tokenizer*.gguf`` next to an omnivoice.cpp LM GGUF (F32 preferred)."""
    found = sorted(p for p in lm_path.parent.glob("omnivoice-tokenizer*.gguf") if p.is_file())
    if len(found) > 1:
        f32 = [p for p in found if "f32" in p.name.lower()]
        if len(f32) == 1:
            return f32[0]
        raise UsageError(f"several codec GGUFs next to {lm_path.name}: {', '.join(p.name for p in found)}",
                         hint="choose one with --codec")
    return found[0] if found else None


def resolve(spec: ModelSpec, path: Path, codec: Path | None) -> ResolvedWeights:
    """``path`` (and the ``--codec`` GGUF of omnivoice.cpp's layout) resolved with the spec."""
    arch = _gguf_architecture(path)
    if arch == CODEC_ARCH:
        raise UsageError(f"{path.name} is omnivoice.cpp's codec (omnivoice-tokenizer) GGUF, not the model",
                         hint="pass the LM GGUF (omnivoice-base-*.gguf) as --model and this file as --codec")
    if codec is not None:
        codec = Path(codec).expanduser()
        if not codec.is_file():
            raise UsageError(f"--codec {str(codec)!r} does not exist")
        codec_arch = _gguf_architecture(codec)
        if codec_arch != CODEC_ARCH:
            raise UsageError(f"--codec {codec.name} is not an omnivoice.cpp codec GGUF "
                             f"(architecture {codec_arch!r}, expected {CODEC_ARCH!r})")
    if arch == LM_ARCH:
        codec = codec or find_codec(path)
        if codec is None:
            raise UsageError(f"{path.name} is omnivoice.cpp's LM GGUF; its codec GGUF is needed too",
                             hint="pass --codec omnivoice-tokenizer-F32.gguf (or put it next to the LM)")
    elif codec is not None:
        raise UsageError("--codec only applies to omnivoice.cpp's LM GGUF",
                         hint="snapshot folders and package GGUFs carry their codec")
    return resolve_weights(spec, path, extra_roots={"$codec": codec} if codec is not None else None)


def _json(weights: ResolvedWeights, key: str) -> dict[str, Any]:
    path = weights.file(key)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {key} of {weights.path}: {exc}") from None


def load_parts(path: Path, options: dict[str, Any] | None = None, *, spec: ModelSpec) -> OmniVoiceParts:
    """Resolve ``path`` (load option ``codec``: omnivoice.cpp's codec GGUF), read the configs and
    the tokenizer, and load the LM and the codec in float32, strictly."""
    from audiocpp.engine.tokenizer import load_tokenizer, tokenizer_from_gguf

    weights = resolve(spec, Path(path), (options or {}).get("codec"))
    lm_src = weights.namespace("weights")
    codec_src = weights.namespace("audio_tokenizer_weights")
    if weights.source_id == "omnivoice_cpp":
        cfg = OmniVoiceConfig.from_gguf(lm_src.metadata)
        codec_cfg = CodecConfig.from_gguf(codec_src.metadata, count_quantizers(codec_src))
        tokenizer = tokenizer_from_gguf(lm_src.metadata, "qwen2")
        sample_rate = codec_cfg.sample_rate
    else:
        cfg, codec_cfg = parse_configs(_json(weights, "config"),
                                       _json(weights, "audio_tokenizer/config.json"),
                                       where=str(weights.path))
        tokenizer = load_tokenizer(weights.file("tokenizer_json"))
        pre = weights.files.get("audio_tokenizer/preprocessor_config.json")
        sample_rate = codec_cfg.sample_rate
        if pre is not None:
            sample_rate = int(json.loads(Path(pre).read_text()).get("sampling_rate", sample_rate))
    if tokenizer.get_vocab_size() > cfg.llm.vocab_size:
        raise ModelError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens but the LM embeds only "
                         f"{cfg.llm.vocab_size}", hint="the tokenizer and weights do not belong together")
    device = device_of(options)
    compute = auto_compute_mode(device, weights.layout, lm_src, gpu_dtype=torch.float16)

    def load_lm(mode: ComputeMode, source: TensorSource | None = None) -> OmniVoiceLM:
        """The LM computing in ``mode`` on ``device`` (a second mode re-opens the weights)."""
        if source is None:
            source = resolve(spec, Path(path), (options or {}).get("codec")).namespace("weights")
        return load_on_meta(lambda: OmniVoiceLM(cfg), lm_source(source), dtype=mode.dtype,
                            what="OmniVoice LM", device=device, quantize=QUANTIZED_LINEARS,
                            keep_stored=STORED_TABLES, stored=mode.stored).eval()

    lm = load_lm(compute, lm_src)
    codec = load_on_meta(lambda: HiggsAudioV2Codec(codec_cfg), codec_source(codec_src), dtype=torch.float32,
                         what="OmniVoice audio tokenizer", device=device)
    return OmniVoiceParts(cfg, lm, codec.eval(), tokenizer, sample_rate, weights.source_id, device, compute,
                          load_lm)
