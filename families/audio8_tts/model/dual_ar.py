"""The fast codebook AR and the DualAR pair (upstream ``ArkttsModel``'s ``fast_*`` modules).

Per frame the fast AR runs the slow AR's hidden state (projected by ``fast_project_in``, an
identity when the widths match) at position 0, whose logits upstream computes and discards;
then ``c0`` (the semantic code) is embedded at position 1, and so on: position ``p`` predicts
code ``p`` over ``codebook_size`` logits. Its 10-slot cache is rewound every frame; attention is
fish-speech's eager form (``q k^T / sqrt(d)``, ``masked_fill``, softmax) over all slots.
"""

from __future__ import annotations

import torch
from torch import nn

from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.layers.decoder import FISH_NAMES, DecoderConfig, DecoderLayer, DecoderStack
from audiocpp.engine.nn.layers.norm import RMSNorm

from ..config import Audio8Config
from .falcon_h1 import FalconH1SlowAR
from .qwen import QwenSlowAR
from .slow_ar import SlowAR


def fast_decoder_config(cfg: Audio8Config) -> DecoderConfig:
    return DecoderConfig(
        dim=cfg.fast_dim, n_head=cfg.fast_n_head, n_kv_head=cfg.fast_n_local_heads,
        head_dim=cfg.fast_head_dim, intermediate_size=cfg.fast_intermediate_size, norm_eps=cfg.norm_eps,
        qkv_bias=cfg.fast_attention_qkv_bias, o_bias=cfg.fast_attention_o_bias,
        qk_norm=cfg.fast_attention_qk_norm, rope_style="interleaved",
        rope_base=cfg.rope_base, rope_table_dtype=torch.bfloat16, attention="eager", names=FISH_NAMES,
    )



def build_slow_ar(config) -> SlowAR:
    """The slow AR named by ``config.slow_backbone``: :class:`QwenSlowAR` (0.6B) or
    :class:`FalconH1SlowAR` (0.1B), each built from an ``Audio8Config``. Parameter names
    are the checkpoint's (``model.safetensors``), so weights load by name."""
    if config.slow_backbone == "qwen":
        return QwenSlowAR(config)
    if config.slow_backbone == "falcon_h1":
        return FalconH1SlowAR(config)
    raise ModelError(f"unknown slow_backbone {config.slow_backbone!r}", hint="use 'qwen' or 'falcon_h1'")


class FastAR(nn.Module):
    def __init__(self, cfg: Audio8Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.fast_project_in: nn.Module = (nn.Linear(cfg.dim, cfg.fast_dim) if cfg.fast_dim != cfg.dim
                                           else nn.Identity())
        self.fast_embeddings = nn.Embedding(cfg.codebook_size, cfg.fast_dim)
        dcfg = fast_decoder_config(cfg)
        self.fast_layers = nn.ModuleList(DecoderLayer(dcfg) for _ in range(cfg.n_fast_layer))
        self.fast_norm = RMSNorm(cfg.fast_dim, cfg.norm_eps)
        self.fast_output = nn.Linear(cfg.fast_dim, cfg.codebook_size, bias=False)
        self.stack = DecoderStack(self.fast_layers, dcfg, cfg.num_codebooks)
        self._positions: torch.Tensor | None = None
        self._valid: torch.Tensor | None = None

    def setup(self, batch_size: int) -> None:
        """The cache for ``batch_size`` rows (kept while the batch size stays)."""
        device = self.fast_embeddings.weight.device
        if self._valid is not None and self._valid.shape[0] == batch_size and self._valid.device == device:
            return
        self.stack.setup(batch_size, self.cfg.num_codebooks)
        self._positions = (torch.arange(self.cfg.num_codebooks, device=device).view(-1, 1, 1)
                           .expand(-1, batch_size, 1))
        self._valid = torch.ones(batch_size, 1, dtype=torch.long, device=device)

    def release(self) -> None:
        self.stack.release()
        self._positions = self._valid = None

    def start(self, slow_hidden: torch.Tensor) -> None:
        """Position 0 of a new frame: the slow hidden state ``[B, 1, dim]`` (its logits are unused)."""
        self.stack.reset()
        self.stack.step(self.fast_project_in(slow_hidden), self._positions[0], self._valid)

    def logits(self, code: torch.Tensor, position: int) -> torch.Tensor:
        """Feed the previous code ``[B]`` at ``position`` (1..) and score the next one:
        ``[B, codebook_size]``."""
        hidden = self.fast_embeddings(code)[:, None]
        hidden = self.stack.step(hidden, self._positions[position], self._valid)
        return self.fast_output(self.fast_norm(hidden))[:, -1]


class DualAR(nn.Module):
    """The slow AR (any :class:`SlowAR` backbone) and the fast AR of one checkpoint."""

    def __init__(self, cfg: Audio8Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.slow: SlowAR = build_slow_ar(cfg)
        self.fast = FastAR(cfg)

    def setup(self, batch_size: int, max_length: int) -> None:
        self.slow.setup(batch_size, max_length)
        self.fast.setup(batch_size)

    def release(self) -> None:
        self.slow.release()
        self.fast.release()
