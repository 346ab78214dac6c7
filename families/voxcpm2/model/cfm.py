"""UnifiedCFM inference: the Euler flow-matching solver around LocDiT (upstream
``voxcpm/modules/locdit/unified_cfm.py``).

Per patch: noise ``z ~ N(0, 1)`` of shape ``(b, feat_dim, patch)`` in the model dtype, drawn
from the request's generator (upstream draws with the global generator: same stream, same
order); a sway-scheduled time grid ``t + coef * (cos(pi t / 2) - 1 + t)`` from 1 to 0;
CFG-zero* (the first ``max(1, int(0.04 * (n + 1)))`` steps take zero velocity); then classifier-
free guidance as one batch of two (``mu`` and zeros) with the optimal scale
``st* = <v_c, v_u> / (|v_u|^2 + 1e-8)`` and ``v = v_u st* + cfg (v_c - v_u st*)``.
"""

from __future__ import annotations

import torch
from torch import nn

from .locdit import LocDiT


def sway_time_grid(n_timesteps: int, coef: float, *, dtype: torch.dtype,
                   device: torch.device) -> torch.Tensor:
    t_span = torch.linspace(1, 0, n_timesteps + 1, device=device, dtype=dtype)
    return t_span + coef * (torch.cos(torch.pi / 2 * t_span) - 1 + t_span)


class UnifiedCFM(nn.Module):
    def __init__(self, in_channels: int, estimator: LocDiT, *, mean_mode: bool = False) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.mean_mode = mean_mode
        self.estimator = estimator

    def draw_noise(self, batch: int, patch_size: int, *, dtype: torch.dtype, device: torch.device,
                   generator: torch.Generator | None) -> torch.Tensor:
        """The one random draw per patch, in upstream's shape and dtype, on the generator's device."""
        where = generator.device if generator is not None else device
        noise = torch.randn((batch, self.in_channels, patch_size), generator=generator, dtype=dtype,
                            device=where)
        return noise.to(device)

    @torch.inference_mode()
    def forward(
        self,
        mu: torch.Tensor,
        n_timesteps: int,
        patch_size: int,
        cond: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        noise: torch.Tensor | None = None,
        temperature: float = 1.0,
        cfg_value: float | torch.Tensor = 1.0,
        sway_sampling_coef: float = 1.0,
        use_cfg_zero_star: bool = True,
    ) -> torch.Tensor:
        """Sample one patch ``(b, feat_dim, patch)`` conditioned on ``mu`` ``(b, mu_dim)`` and
        the previous patch ``cond`` ``(b, feat_dim, P')``. ``noise`` replaces the draw;
        ``cfg_value`` is one value or one per row (``(b, 1, 1)``)."""
        b = mu.shape[0]
        if noise is None:
            noise = self.draw_noise(b, patch_size, dtype=mu.dtype, device=mu.device, generator=generator)
        z = noise.to(mu.dtype) * temperature
        t_span = sway_time_grid(n_timesteps, sway_sampling_coef, dtype=mu.dtype, device=mu.device)
        return self.solve_euler(z, t_span, mu, cond, cfg_value=cfg_value, use_cfg_zero_star=use_cfg_zero_star)

    def solve_euler(self, x: torch.Tensor, t_span: torch.Tensor, mu: torch.Tensor, cond: torch.Tensor, *,
                    cfg_value: float | torch.Tensor, use_cfg_zero_star: bool) -> torch.Tensor:
        t, dt = t_span[0], t_span[0] - t_span[1]
        b = x.size(0)
        zero_steps = max(1, int(len(t_span) * 0.04))
        # The CFG batch: conditional rows first, unconditional (mu = 0) rows second. Only x,
        # t and dt change between steps.
        mu_in = torch.cat([mu, torch.zeros_like(mu)], dim=0)
        cond_in = torch.cat([cond, cond], dim=0)
        fixed = None  # the estimator's inputs that no step changes: made once, at the first step that runs
        for step in range(1, len(t_span)):
            if use_cfg_zero_star and step <= zero_steps:
                dphi_dt = torch.zeros_like(x)
            else:
                x_in = torch.cat([x, x], dim=0)
                t_in = t.reshape(1).expand(2 * b)
                dt_in = dt.reshape(1).expand(2 * b) if self.mean_mode else torch.zeros_like(t_in)
                if fixed is None:
                    fixed = self.estimator.fixed_inputs(cond_in, None if self.mean_mode else dt_in)
                out = self.estimator(x_in, mu_in, t_in, cond_in, dt_in, fixed=fixed)
                v_cond, v_uncond = out[:b], out[b:]
                if use_cfg_zero_star:
                    pos, neg = v_cond.reshape(b, -1), v_uncond.reshape(b, -1)
                    st = (torch.sum(pos * neg, dim=1, keepdim=True)
                          / (torch.sum(neg**2, dim=1, keepdim=True) + 1e-8))
                    st = st.view(b, *([1] * (v_cond.dim() - 1)))
                    dphi_dt = v_uncond * st + cfg_value * (v_cond - v_uncond * st)
                else:
                    dphi_dt = v_uncond + cfg_value * (v_cond - v_uncond)
            x = x - dt * dphi_dt
            t = t - dt
            if step < len(t_span) - 1:
                dt = t - t_span[step + 1]
        return x

