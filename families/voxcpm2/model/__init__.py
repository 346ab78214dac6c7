"""The VoxCPM generator network (everything but the AudioVAE, which is ``codec.py``), named as
upstream; its parts are the modules of this package (``minicpm``, ``locenc``, ``locdit``,
``cfm``, ``fsq``).

State-dict names equal upstream's ``VoxCPM2Model`` / ``VoxCPMModel`` minus the ``audio_vae.``
tensors (which live in their own namespace): ``base_lm``, ``residual_lm``, ``feat_encoder``,
``feat_decoder.estimator``, ``fsq_layer``, ``enc_to_lm_proj``, ``lm_to_dit_proj``,
``res_to_dit_proj``, ``fusion_concat_proj`` (v2 only), ``stop_proj``, ``stop_head``.

The two v1/v2 switches that live here (``config.variant``):

- :meth:`VoxCPMModel.residual_input`: ``concat_proj`` (v2) or ``add`` (v1);
- :meth:`VoxCPMModel.dit_condition`: ``concat`` (v2, two DiT prefix tokens) or ``sum`` (v1).
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import VoxCPMConfig
from .cfm import UnifiedCFM
from .fsq import ScalarQuantizationLayer, stop_logits
from .locdit import LocDiT
from .locenc import LocEnc
from .minicpm import MiniCPMModel


class VoxCPMModel(nn.Module):
    def __init__(self, cfg: VoxCPMConfig) -> None:
        super().__init__()
        self.config = cfg
        hidden = cfg.lm.hidden_size
        variant = cfg.variant
        self.base_lm = MiniCPMModel(cfg.lm)
        self.residual_lm = MiniCPMModel(cfg.residual_lm_config())
        self.feat_encoder = LocEnc(cfg.encoder_lm_config(), cfg.feat_dim)
        estimator = LocDiT(cfg.dit_lm_config(), cfg.feat_dim,
                           mu_tokens=2 if variant.dit_mu == "concat" else 0)
        self.feat_decoder = UnifiedCFM(cfg.feat_dim, estimator, mean_mode=cfg.dit_mean_mode)
        self.fsq_layer = ScalarQuantizationLayer(
            hidden, hidden, cfg.scalar_quantization_latent_dim, cfg.scalar_quantization_scale
        )
        self.enc_to_lm_proj = nn.Linear(cfg.encoder.hidden_dim, hidden)
        self.lm_to_dit_proj = nn.Linear(hidden, cfg.dit.hidden_dim)
        self.res_to_dit_proj = nn.Linear(hidden, cfg.dit.hidden_dim)
        if variant.residual_fusion == "concat_proj":
            self.fusion_concat_proj = nn.Linear(hidden * 2, hidden)
        self.stop_proj = nn.Linear(hidden, hidden)
        self.stop_head = nn.Linear(hidden, 2, bias=False)

    @property
    def dtype(self) -> torch.dtype:
        return self.base_lm.norm.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.base_lm.norm.weight.device

    # -- the pieces of one AR step ------------------------------------------------------
    def encode_patches(self, feats: torch.Tensor) -> torch.Tensor:
        """``(B, T, P, D)`` latent patches -> ``(B, T, hidden)`` LM inputs."""
        return self.enc_to_lm_proj(self.feat_encoder(feats))

    def residual_input(self, lm_out: torch.Tensor, audio_embed: torch.Tensor) -> torch.Tensor:
        """Residual-LM input from the (FSQ'd) base-LM output and the masked patch embedding."""
        if self.config.variant.residual_fusion == "concat_proj":
            return self.fusion_concat_proj(torch.cat((lm_out, audio_embed), dim=-1))
        return lm_out + audio_embed

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        """The DiT's ``mu`` from the two LM states."""
        a, b = self.lm_to_dit_proj(lm_hidden), self.res_to_dit_proj(residual_hidden)
        if self.config.variant.dit_mu == "concat":
            return torch.cat((a, b), dim=-1)
        return a + b

    def stop_logits(self, lm_hidden: torch.Tensor) -> torch.Tensor:
        return stop_logits(self.stop_proj, self.stop_head, lm_hidden)
