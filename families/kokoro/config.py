"""Typed configuration of Kokoro-82M, read from hexgrad's ``config.json`` (``KModel.__init__``'s keys).

A config holds the phoneme ``vocab`` (symbol -> token id), the PL-BERT (ALBERT) sizes under
``plbert``, the prosody predictor and text encoder sizes, and the iSTFTNet decoder's ``istftnet``
block. Every field is read strictly (``engine.config_values``): a wrong type or an impossible size is a
ModelError naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from audiocpp.engine.config_values import (
    as_float,
    as_int,
    as_ints,
    check_config,
    config_errors,
)

#: The samples per second every Kokoro decoder writes (upstream hard-codes 24000 in its source module).
SAMPLE_RATE = 24000


@dataclass(frozen=True)
class AlbertConfig:
    """PL-BERT: transformers' ``AlbertConfig`` defaults, overridden by ``plbert``."""

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
class ISTFTNetConfig:
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
class KokoroConfig:
    vocab: dict[str, int] = field(hash=False)
    n_token: int
    hidden_dim: int
    style_dim: int
    n_layer: int
    max_dur: int
    text_encoder_kernel_size: int
    n_mels: int
    plbert: AlbertConfig
    istftnet: ISTFTNetConfig
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
    def from_dict(cls, raw: dict[str, Any], where: str = "config.json") -> KokoroConfig:
        with config_errors(where):
            if not isinstance(raw, dict):
                raise TypeError("expected a JSON object")
            vocab_raw = raw.get("vocab")
            if not isinstance(vocab_raw, dict) or not vocab_raw:
                raise ValueError("'vocab' must be an object mapping phoneme symbols to token ids")
            vocab = {}
            for symbol, ident in vocab_raw.items():
                if not isinstance(symbol, str) or len(symbol) != 1:
                    raise ValueError(f"vocab key {symbol!r} must be one character")
                vocab[symbol] = as_int(ident)
            n_token = as_int(raw["n_token"])
            bad = [s for s, i in vocab.items() if not 0 < i < n_token]
            if bad:
                raise ValueError(f"vocab ids must lie in 1..n_token-1 ({n_token - 1}); {bad[0]!r} does not")
            pl = dict(raw.get("plbert") or {})
            albert = AlbertConfig(
                vocab_size=n_token,
                **{k: (as_float(v) if k == "layer_norm_eps" else as_int(v))
                   for k, v in pl.items() if k in _ALBERT_INT_KEYS},
            )
            ist = raw["istftnet"]
            dilations = ist["resblock_dilation_sizes"]
            if not isinstance(dilations, list):
                raise TypeError("istftnet.resblock_dilation_sizes must be a list of lists")
            istft = ISTFTNetConfig(
                upsample_rates=as_ints(ist["upsample_rates"]),
                upsample_kernel_sizes=as_ints(ist["upsample_kernel_sizes"]),
                upsample_initial_channel=as_int(ist["upsample_initial_channel"]),
                resblock_kernel_sizes=as_ints(ist["resblock_kernel_sizes"]),
                resblock_dilation_sizes=tuple(as_ints(d) for d in dilations),
                gen_istft_n_fft=as_int(ist["gen_istft_n_fft"]),
                gen_istft_hop_size=as_int(ist["gen_istft_hop_size"]),
            )
            cfg = cls(
                vocab=vocab, n_token=n_token, hidden_dim=as_int(raw["hidden_dim"]),
                style_dim=as_int(raw["style_dim"]), n_layer=as_int(raw["n_layer"]),
                max_dur=as_int(raw["max_dur"]),
                text_encoder_kernel_size=as_int(raw["text_encoder_kernel_size"]),
                n_mels=as_int(raw.get("n_mels", 80)), plbert=albert, istftnet=istft,
                dropout=as_float(raw.get("dropout", 0.2)),
            )
            _check_shapes(cfg)
        check_config(cfg, where, may_be_zero=("dropout",))
        return cfg

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
            "plbert": {k: getattr(self.plbert, k) for k in _ALBERT_INT_KEYS
                       if k not in ("embedding_size", "num_hidden_groups", "inner_group_num",
                                    "type_vocab_size", "layer_norm_eps")},
            "vocab": dict(self.vocab),
        }


_ALBERT_INT_KEYS = ("hidden_size", "num_attention_heads", "intermediate_size", "max_position_embeddings",
                    "num_hidden_layers", "embedding_size", "num_hidden_groups", "inner_group_num",
                    "type_vocab_size", "layer_norm_eps")


def _check_shapes(cfg: KokoroConfig) -> None:
    pl, ist = cfg.plbert, cfg.istftnet
    if pl.hidden_size % pl.num_attention_heads:
        raise ValueError(f"plbert.hidden_size {pl.hidden_size} is not a multiple of num_attention_heads "
                         f"{pl.num_attention_heads}")
    if pl.num_hidden_layers % pl.num_hidden_groups:
        raise ValueError("plbert.num_hidden_layers must be a multiple of num_hidden_groups")
    if pl.max_position_embeddings < 3:
        raise ValueError("plbert.max_position_embeddings must leave room for a phoneme and the two "
                         "boundary tokens")
    if len(ist.upsample_rates) != len(ist.upsample_kernel_sizes) or not ist.upsample_rates:
        raise ValueError("istftnet.upsample_rates and upsample_kernel_sizes must be non-empty lists of one "
                         "length")
    if len(ist.resblock_kernel_sizes) != len(ist.resblock_dilation_sizes):
        raise ValueError("istftnet.resblock_kernel_sizes and resblock_dilation_sizes must have one length")
    if any(len(d) != 3 for d in ist.resblock_dilation_sizes):
        raise ValueError("istftnet.resblock_dilation_sizes must hold three dilations per block")
    if ist.upsample_initial_channel % (2 ** len(ist.upsample_rates)):
        raise ValueError("istftnet.upsample_initial_channel must halve once per upsampling stage")
    if cfg.hidden_dim % 2 or cfg.hidden_dim < 2:
        raise ValueError("hidden_dim must be even (its LSTMs are bidirectional halves)")
    if cfg.style_dim < 1:
        raise ValueError("style_dim must be positive")


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
