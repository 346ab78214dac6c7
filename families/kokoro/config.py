"""Typed configuration of Kokoro-82M, read from hexgrad's ``config.json`` (``KModel.__init__``'s keys).

A config holds the phoneme ``vocab`` (symbol -> token id), the PL-BERT (ALBERT) sizes under
``plbert``, the prosody predictor and text encoder sizes, and the iSTFTNet decoder's ``istftnet``
block. Every field is read by ``engine.config_values`` (``ConfigSection.from_dict``): a wrong type or an
impossible size is a ModelError naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from audiocpp.engine.config_values import ConfigSection, config_error, setting

#: The samples per second every Kokoro decoder writes (upstream hard-codes 24000 in its source module).
SAMPLE_RATE = 24000


@dataclass(frozen=True)
class AlbertConfig(ConfigSection):
    """PL-BERT: transformers' ``AlbertConfig`` defaults, overridden by ``plbert``; ``vocab_size`` is
    the config's ``n_token``."""

    vocab_size: int
    hidden_size: int = 768
    num_attention_heads: int = 12
    intermediate_size: int = 2048
    max_position_embeddings: int = 512
    num_hidden_layers: int = 12
    embedding_size: int = 128
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class ISTFTNetConfig(ConfigSection):
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    gen_istft_n_fft: int
    gen_istft_hop_size: int

    @property
    def samples_per_frame(self) -> int:
        """Output samples per frame of the generator's input (at twice the duration frame rate)."""
        return math.prod(self.upsample_rates) * self.gen_istft_hop_size


@dataclass(frozen=True)
class KokoroConfig(ConfigSection):
    vocab: dict[str, int] = setting(hash=False)
    n_token: int
    hidden_dim: int
    style_dim: int
    n_layer: int
    max_dur: int
    text_encoder_kernel_size: int
    plbert: AlbertConfig
    istftnet: ISTFTNetConfig
    n_mels: int = 80
    dropout: float = 0.2

    @property
    def context_length(self) -> int:
        """Token ids one forward takes, the two boundary ids ``0`` included (ALBERT's positions)."""
        return self.plbert.max_position_embeddings

    @property
    def max_phonemes(self) -> int:
        return self.context_length - 2

    @property
    def samples_per_duration_frame(self) -> int:
        """Samples of audio per predicted duration frame: 600 at 24 kHz for v1.0 (the decoder runs
        at twice the duration rate, its F0 curve at that rate)."""
        return 2 * self.istftnet.samples_per_frame

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    @classmethod
    def prepare(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        """PL-BERT's vocabulary is the phoneme vocabulary (``n_token``); no ``plbert`` is all defaults."""
        plbert = {} if raw.get("plbert") is None else raw["plbert"]
        if isinstance(plbert, dict):
            raw["plbert"] = {**plbert, "vocab_size": raw.get("n_token")}
        return raw

    def check(self, where: str) -> None:
        problem = _shape_problem(self)
        if problem:
            raise config_error(where, problem)

    def to_dict(self) -> dict[str, Any]:
        """hexgrad's config.json layout (what a converted model folder or a package embeds)."""
        ist = self.istftnet
        return {
            "istftnet": {
                "upsample_kernel_sizes": list(ist.upsample_kernel_sizes),
                "upsample_rates": list(ist.upsample_rates),
                "gen_istft_hop_size": ist.gen_istft_hop_size,
                "gen_istft_n_fft": ist.gen_istft_n_fft,
                "resblock_dilation_sizes": [list(d) for d in ist.resblock_dilation_sizes],
                "resblock_kernel_sizes": list(ist.resblock_kernel_sizes),
                "upsample_initial_channel": ist.upsample_initial_channel,
            },
            "dim_in": 64, "dropout": self.dropout, "hidden_dim": self.hidden_dim, "max_conv_dim": 512,
            "max_dur": self.max_dur, "multispeaker": True, "n_layer": self.n_layer, "n_mels": self.n_mels,
            "n_token": self.n_token, "style_dim": self.style_dim,
            "text_encoder_kernel_size": self.text_encoder_kernel_size,
            "plbert": {k: getattr(self.plbert, k) for k in _PLBERT_KEYS},
            "vocab": dict(self.vocab),
        }


#: The ``plbert`` keys of hexgrad's config.json (the other AlbertConfig fields keep their defaults).
_PLBERT_KEYS = ("hidden_size", "num_attention_heads", "intermediate_size", "max_position_embeddings",
                "num_hidden_layers")


def _shape_problem(cfg: KokoroConfig) -> str | None:
    """The first thing in ``cfg`` that the networks cannot be built with, if any."""
    pl, ist = cfg.plbert, cfg.istftnet
    if not cfg.vocab:
        return "'vocab' must be an object mapping phoneme symbols to token ids"
    long = [s for s in cfg.vocab if len(s) != 1]
    if long:
        return f"vocab key {long[0]!r} must be one character"
    bad = [s for s, i in cfg.vocab.items() if not 0 < i < cfg.n_token]
    if bad:
        return f"vocab ids must lie in 1..n_token-1 ({cfg.n_token - 1}); {bad[0]!r} does not"
    if pl.hidden_size % pl.num_attention_heads:
        return (f"plbert.hidden_size {pl.hidden_size} is not a multiple of num_attention_heads "
                f"{pl.num_attention_heads}")
    if pl.num_hidden_layers % pl.num_hidden_groups:
        return "plbert.num_hidden_layers must be a multiple of num_hidden_groups"
    if pl.max_position_embeddings < 3:
        return "plbert.max_position_embeddings must leave room for a phoneme and the two boundary tokens"
    if len(ist.upsample_rates) != len(ist.upsample_kernel_sizes) or not ist.upsample_rates:
        return "istftnet.upsample_rates and upsample_kernel_sizes must be non-empty lists of one length"
    if len(ist.resblock_kernel_sizes) != len(ist.resblock_dilation_sizes):
        return "istftnet.resblock_kernel_sizes and resblock_dilation_sizes must have one length"
    if any(len(d) != 3 for d in ist.resblock_dilation_sizes):
        return "istftnet.resblock_dilation_sizes must hold three dilations per block"
    if ist.upsample_initial_channel % (2 ** len(ist.upsample_rates)):
        return "istftnet.upsample_initial_channel must halve once per upsampling stage"
    if cfg.hidden_dim % 2:
        return "hidden_dim must be even (its LSTMs are bidirectional halves)"
    return None


#: Kokoro-82M v1.0's config.json without its vocab (hexgrad/Kokoro-82M; kokoro-onnx's export was made
#: from it). The ONNX files carry no config: the converter writes this one, with the vocab of the files.
V1_0: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6], "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20, "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512,
    },
    "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512, "max_dur": 50, "multispeaker": True,
    "n_layer": 3, "n_mels": 80, "n_token": 178, "style_dim": 128, "text_encoder_kernel_size": 5,
    "plbert": {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
               "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1},
}
