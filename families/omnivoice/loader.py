"""Loading OmniVoice from any of its three layouts into torch, and the loaded model.

(a) a k2-fsa/OmniVoice snapshot folder (root + ``audio_tokenizer/``); (b) omnivoice.cpp's
two GGUFs, the LM as ``--model`` and the codec as ``--codec`` (load option ``codec``) or
found next to it (``omnivoice-tokenizer*.gguf``); (c) our package GGUF (namespaces
``weights/`` and ``audio_tokenizer_weights/`` with the config and tokenizer files
embedded). The spec's ``sources`` say where each piece lives; ``convert.py`` maps names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from audiocpp.engine.errors import ModelError, UsageError
from audiocpp.engine.model import LoadedModel
from audiocpp.engine.spec.model import ModelSpec
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.weights.loading import load_module_weights
from audiocpp.engine.weights.resolve import ResolvedWeights, resolve_weights

from .codec import HiggsAudioV2Codec
from .config import CodecConfig, OmniVoiceConfig
from .convert import codec_source, count_quantizers, lm_source
from .model import OmniVoiceLM

LM_ARCH = "omnivoice-lm"
CODEC_ARCH = "omnivoice-tokenizer"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


def _build(cls: type[torch.nn.Module], cfg: Any) -> torch.nn.Module:
    with torch.device("meta"):
        module = cls(cfg)
    return module


def load_model(spec: ModelSpec, path: Path, options: dict[str, Any]) -> OmniVoiceModel:
    from audiocpp.engine.tokenizer import load_tokenizer, tokenizer_from_gguf

    weights = resolve(spec, path, options.get("codec"))
    lm_src = weights.namespace("weights")
    codec_src = weights.namespace("audio_tokenizer_weights")
    if weights.source_id == "omnivoice_cpp":
        cfg = OmniVoiceConfig.from_gguf(lm_src.metadata)
        codec_cfg = CodecConfig.from_gguf(codec_src.metadata, count_quantizers(codec_src))
        tokenizer = tokenizer_from_gguf(lm_src.metadata, "qwen2")
        sample_rate = codec_cfg.sample_rate
    else:
        cfg = OmniVoiceConfig.from_dict(_json(weights, "config"))
        codec_cfg = CodecConfig.from_dict(_json(weights, "audio_tokenizer/config.json"))
        tokenizer = load_tokenizer(weights.file("tokenizer_json"))
        pre = weights.files.get("audio_tokenizer/preprocessor_config.json")
        sample_rate = codec_cfg.sample_rate
        if pre is not None:
            sample_rate = int(json.loads(Path(pre).read_text()).get("sampling_rate", sample_rate))
    if tokenizer.get_vocab_size() > cfg.llm.vocab_size:
        raise ModelError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens but the LM embeds only "
                         f"{cfg.llm.vocab_size}", hint="the tokenizer and weights do not belong together")
    lm = _build(OmniVoiceLM, cfg)
    load_module_weights(lm, lm_source(lm_src), dtype=torch.float32, what="OmniVoice LM")
    lm.codebook_layer_offsets = torch.arange(cfg.num_audio_codebook) * cfg.audio_vocab_size
    codec = _build(HiggsAudioV2Codec, codec_cfg)
    load_module_weights(codec, codec_source(codec_src), dtype=torch.float32, what="OmniVoice audio tokenizer")
    return OmniVoiceModel(spec, path, options, lm.eval(), codec.eval(), tokenizer, sample_rate, weights.source_id)


class OmniVoiceModel(LoadedModel):
    def __init__(self, spec: ModelSpec, path: Path, load_options: dict[str, Any], lm: OmniVoiceLM,
                 codec: HiggsAudioV2Codec, tokenizer: Any, sample_rate: int, source_id: str) -> None:
        super().__init__(spec, path, load_options)
        self.lm = lm
        self.codec = codec
        self.tokenizer = tokenizer
        self.sample_rate = sample_rate
        self.source_id = source_id
        self._lm_variants: dict[torch.dtype, OmniVoiceLM] = {torch.float32: lm}

    @property
    def cfg(self) -> OmniVoiceConfig:
        return self.lm.cfg

    def lm_for(self, dtype: torch.dtype) -> OmniVoiceLM:
        """The LM computing in ``dtype``, made once: the backbone and heads are cast copies,
        the embedding tables are shared with the float32 model (their rows are summed in
        float32, then cast)."""
        if dtype not in self._lm_variants:
            shared = ("llm.embed_tokens.", "audio_embeddings.")
            state = {name: (t if name.startswith(shared) else t.to(dtype))
                     for name, t in self.lm.state_dict().items()}
            variant = _build(OmniVoiceLM, self.cfg)
            variant.load_state_dict(state, strict=True, assign=True)
            variant.codebook_layer_offsets = self.lm.codebook_layer_offsets
            self._lm_variants[dtype] = variant.eval()
        return self._lm_variants[dtype]

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]):
        from .session import OmniVoiceSession

        return OmniVoiceSession(self, task, mode, options)

    def load_voice_prompt(self, path: Path):
        from .voice import OmniVoicePrompt

        return OmniVoicePrompt.load(path, num_codebooks=self.cfg.num_audio_codebook,
                                    codebook_size=self.codec.cfg.codebook_size)
