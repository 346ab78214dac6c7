"""The Mamba2 mixer (state-space duality), as transformers' ``torch_forward`` computes it on CPU.

A prompt runs through the chunked SSD scan (:func:`ssd_chunked`); every later token through
the recurrent one-step update (:meth:`Mamba2Mixer.step`), which reads and writes a static
:class:`Mamba2Cache` in place. Parameter names follow transformers (``in_proj``, ``conv1d``,
``dt_bias``, ``A_log``, ``D``, ``norm``, ``out_proj``) so state dicts map one to one.

Numerics: ``A_log``, ``D``, ``dt_bias`` and the depthwise conv are computed in float32 whatever
the compute dtype (and held in float32 after :meth:`Mamba2Mixer.keep_fp32`; audio.cpp stores them
F32 for the same reason); the scan runs in float32 and the SSM state is held in float32. Nothing
is computed at construction, so the mixer can be built on the ``meta`` device and loaded. The scan
follows transformers' decomposition (intra-chunk diagonal blocks, chunk states, inter-chunk
recurrence, state-to-output) with the large broadcast-and-sum products written as ``einsum``
contractions: the same terms summed in another order, a relative difference of ~1e-7 in float32.
The one-token update reproduces transformers' operation order exactly.

Used by Audio8 TTS's Falcon-H1 backbone (0.1B) only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


def segment_sum(x: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = sum(x[..., j+1 : i+1])`` for ``j <= i``, ``-inf`` above the diagonal.

    Computed as transformers does (masked cumulative sum), which keeps ``exp`` of it stable.
    """
    n = x.size(-1)
    x = x[..., None].expand(*x.size(), n)
    mask = torch.tril(torch.ones(n, n, device=x.device, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    out = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(n, n, device=x.device, dtype=torch.bool), diagonal=0)
    return out.masked_fill(~mask, -torch.inf)


def _chunked(x: torch.Tensor, pad: int, chunk: int) -> torch.Tensor:
    """(B, T, ...) -> (B, T_padded / chunk, chunk, ...), zero-padded at the end of T."""
    if pad:
        x = F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad))
    return x.reshape(x.shape[0], -1, chunk, *x.shape[2:])


def ssd_chunked(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                D: torch.Tensor, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The SSD scan from a zero state over a whole sequence, in float32.

    ``x``: (b, T, H, P); ``dt``: (b, T, H) after softplus; ``A``: (H,) negative; ``B``, ``C``:
    (b, T, H, N), already repeated from groups to heads; ``D``: (H,).
    Returns ``y`` (b, T, H, P) and the final state (b, H, P, N).
    """
    seq_len = x.shape[1]
    pad = (chunk_size - seq_len % chunk_size) % chunk_size
    d_residual = D[:, None] * (F.pad(x, (0, 0, 0, 0, 0, pad)) if pad else x)
    x = x * dt[..., None]
    a = A.to(x.dtype) * dt
    x, a, B, C = (_chunked(t, pad, chunk_size) for t in (x, a, B, C))
    a = a.permute(0, 3, 1, 2)                                   # (b, H, c, l)
    a_cumsum = torch.cumsum(a, dim=-1)

    # 1. Intra-chunk (diagonal blocks): causal "attention" C_l . B_s weighted by the decay.
    decay = torch.exp(segment_sum(a))                           # (b, H, c, l, s)
    scores = torch.einsum("bclhn,bcshn->bclsh", C, B)
    scores = scores * decay.permute(0, 2, 3, 4, 1)
    y_diag = torch.einsum("bclsh,bcshp->bclhp", scores, x)

    # 2. Each chunk's own end state.
    decay_states = torch.exp(a_cumsum[:, :, :, -1:] - a_cumsum)  # (b, H, c, l)
    b_decay = B * decay_states.permute(0, 2, 3, 1)[..., None]
    states = torch.einsum("bclhn,bclhp->bchpn", b_decay, x)

    # 3. Inter-chunk recurrence: the state entering every chunk, and the final state.
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segment_sum(F.pad(a_cumsum[:, :, :, -1], (1, 0))))  # (b, H, z, c)
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]

    # 4. Entering state -> output within each chunk.
    state_decay_out = torch.exp(a_cumsum).permute(0, 2, 3, 1)   # (b, c, l, H)
    y_off = torch.einsum("bclhn,bchpn->bclhp", C, states) * state_decay_out[..., None]

    y = (y_diag + y_off).reshape(x.shape[0], -1, *x.shape[3:]) + d_residual
    return y[:, :seq_len], final_state


class Mamba2Cache:
    """Static per-layer Mamba2 state: the last ``d_conv`` conv inputs and the SSM state (float32)."""

    def __init__(self, num_layers: int, batch_size: int, conv_dim: int, d_conv: int, n_heads: int,
                 head_dim: int, d_state: int, *, device: torch.device | str = "cpu") -> None:
        self.conv = torch.zeros(num_layers, batch_size, conv_dim, d_conv, device=device)
        self.ssm = torch.zeros(num_layers, batch_size, n_heads, head_dim, d_state, device=device)

    def reset(self) -> None:
        self.conv.zero_()
        self.ssm.zero_()


class GatedRMSNorm(nn.Module):
    """Mamba2's grouped RMSNorm with a SiLU gate (``mamba_rms_norm``), as FalconH1RMSNormGated."""

    def __init__(self, dim: int, eps: float, n_groups: int, norm_before_gate: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.n_groups, self.norm_before_gate = eps, n_groups, norm_before_gate

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        if not self.norm_before_gate:
            x = x * F.silu(gate.to(torch.float32))
        shape = x.shape
        h = x.to(torch.float32).reshape(*shape[:-1], self.n_groups, shape[-1] // self.n_groups)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = (self.weight.view(self.n_groups, -1) * h).reshape(shape)
        if self.norm_before_gate:
            h = h * F.silu(gate.to(torch.float32))
        return h.to(dtype)


class Mamba2Mixer(nn.Module):
    """Mamba2 mixer: in_proj -> (gate, xBC, dt); causal depthwise conv + SiLU on xBC; SSD; gated out.

    ``zxbcdt_multipliers`` (Falcon-H1's ``ssm_multipliers``) scale the five sections of the
    in_proj output (gate, x, B, C, dt); all ones is the plain mixer.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, n_heads: int, head_dim: int, d_state: int, *,
                 n_groups: int = 1, d_conv: int = 4, chunk_size: int = 256, conv_bias: bool = True,
                 proj_bias: bool = False, out_bias: bool = False, rms_norm: bool = False,
                 norm_before_gate: bool = False, norm_eps: float = 1e-6,
                 zxbcdt_multipliers: Sequence[float] | None = None) -> None:
        super().__init__()
        if n_heads * head_dim != intermediate_size:
            raise ValueError(f"mamba heads {n_heads} x head_dim {head_dim} != d_ssm {intermediate_size}")
        if n_heads % n_groups:
            raise ValueError(f"mamba heads {n_heads} not divisible by groups {n_groups}")
        self.intermediate_size, self.n_heads, self.head_dim = intermediate_size, n_heads, head_dim
        self.d_state, self.n_groups, self.d_conv, self.chunk_size = d_state, n_groups, d_conv, chunk_size
        self.conv_dim = intermediate_size + 2 * n_groups * d_state
        self.in_proj = nn.Linear(hidden_size, intermediate_size + self.conv_dim + n_heads, bias=proj_bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim, bias=conv_bias,
                                padding=d_conv - 1)
        self.dt_bias = nn.Parameter(torch.ones(n_heads))
        self.A_log = nn.Parameter(torch.zeros(n_heads))
        self.D = nn.Parameter(torch.ones(n_heads))
        self.norm = (GatedRMSNorm(intermediate_size, norm_eps, n_groups, norm_before_gate) if rms_norm
                     else None)
        self.out_proj = nn.Linear(intermediate_size, hidden_size, bias=out_bias)
        mult = [1.0] * 5 if zxbcdt_multipliers is None else [float(m) for m in zxbcdt_multipliers]
        if len(mult) != 5:
            raise ValueError(f"zxbcdt_multipliers needs 5 values, got {len(mult)}")
        self.multipliers = tuple(mult) if any(m != 1.0 for m in mult) else None
        self._mup: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def keep_fp32(self) -> None:
        """Hold ``A_log``, ``D``, ``dt_bias`` and the conv in float32 (call after a dtype cast)."""
        for p in (self.A_log, self.D, self.dt_bias, self.conv1d.weight, self.conv1d.bias):
            if p is not None:
                p.data = p.data.float()

    def _mup_vector(self, like: torch.Tensor) -> torch.Tensor:
        """transformers' ``mup_vector``: the five multipliers over the in_proj output (float32)."""
        key = (like.device, like.dtype)
        if key not in self._mup:
            assert self.multipliers is not None
            gs = self.n_groups * self.d_state
            sizes = [self.intermediate_size, self.intermediate_size, gs, gs, self.n_heads]
            self._mup[key] = torch.cat([torch.full((s,), m, device=like.device)
                                        for s, m in zip(sizes, self.multipliers)])
        return self._mup[key]

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        proj = self.in_proj(x)
        if self.multipliers is not None:
            proj = proj * self._mup_vector(proj)
        gate, xbc, dt = proj.split([self.intermediate_size, self.conv_dim, self.n_heads], dim=-1)
        return gate, xbc, dt

    def _output(self, y: torch.Tensor, gate: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        out = self.norm(y, gate) if self.norm is not None else y * F.silu(gate)
        return self.out_proj(out.to(dtype))

    def forward(self, x: torch.Tensor, cache: Mamba2Cache | None = None, layer: int = 0, *,
                pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Prefill ``x`` (B, T, hidden) from a zero state; stores the final states in ``cache``.

        ``pad_mask`` (B, T), 1/True at real tokens, zeroes the input and the conv output at
        padded positions (transformers' ``apply_mask_to_padding_states``), so left padding
        leaves the states at zero.
        """
        batch, seq_len, _ = x.shape
        dtype = x.dtype
        keep = None if pad_mask is None else pad_mask[:, :, None]
        if keep is not None:
            x = (x * keep).to(dtype)
        gate, xbc, dt = self._project(x)
        xbc_t = xbc.transpose(1, 2).float()
        if cache is not None:
            cache.conv[layer].copy_(F.pad(xbc_t, (self.d_conv - seq_len, 0)))
        conv = self.conv1d
        bias = None if conv.bias is None else conv.bias.float()
        xbc = F.conv1d(xbc_t, conv.weight.float(), bias, padding=self.d_conv - 1, groups=self.conv_dim)
        xbc = F.silu(xbc[..., :seq_len].transpose(1, 2))
        if keep is not None:
            xbc = xbc * keep
        hs, B, C = xbc.split([self.intermediate_size, self.n_groups * self.d_state,
                              self.n_groups * self.d_state], dim=-1)
        rep = self.n_heads // self.n_groups
        A = -torch.exp(self.A_log.float())
        dt = F.softplus(dt + self.dt_bias.float())
        hs = hs.reshape(batch, seq_len, -1, self.head_dim).float()
        B = B.reshape(batch, seq_len, -1, self.d_state).float().repeat_interleave(rep, dim=2)
        C = C.reshape(batch, seq_len, -1, self.d_state).float().repeat_interleave(rep, dim=2)
        y, state = ssd_chunked(hs, dt.float(), A, B, C, self.D.float(), self.chunk_size)
        if cache is not None:
            cache.ssm[layer].copy_(state)
        return self._output(y.reshape(batch, seq_len, -1), gate, dtype)

    def step(self, x: torch.Tensor, cache: Mamba2Cache, layer: int = 0) -> torch.Tensor:
        """One token ``x`` (B, 1, hidden) through the recurrent update; advances ``cache`` in place."""
        return self._step(x, cache.conv[layer], cache.ssm[layer])

    def step_rows(self, x: torch.Tensor, caches: list[Mamba2Cache], layer: int = 0) -> torch.Tensor:
        """One token per row (``x`` (B, 1, hidden)), row ``b`` on its own one-row ``caches[b]``:
        the rows' states are stacked for the update and written back."""
        if len(caches) == 1:
            return self.step(x, caches[0], layer)
        conv = torch.cat([c.conv[layer] for c in caches])
        ssm = torch.cat([c.ssm[layer] for c in caches])
        out = self._step(x, conv, ssm)
        for b, c in enumerate(caches):
            c.conv[layer].copy_(conv[b:b + 1])
            c.ssm[layer].copy_(ssm[b:b + 1])
        return out

    def _step(self, x: torch.Tensor, conv_state: torch.Tensor, ssm: torch.Tensor) -> torch.Tensor:
        """The update on ``conv_state`` (B, conv_dim, d_conv) and ``ssm`` (B, H, P, N), in place."""
        batch = x.shape[0]
        dtype = x.dtype
        gate, xbc, dt = self._project(x)
        conv_state.copy_(torch.cat([conv_state[:, :, 1:], xbc[:, 0, :, None].float()], dim=-1))
        xbc = torch.sum(conv_state * self.conv1d.weight[:, 0].float(), dim=-1)
        if self.conv1d.bias is not None:
            xbc = xbc + self.conv1d.bias.float()
        xbc = F.silu(xbc)
        hs, B, C = xbc.split([self.intermediate_size, self.n_groups * self.d_state,
                              self.n_groups * self.d_state], dim=-1)
        rep = self.n_heads // self.n_groups
        A = -torch.exp(self.A_log.float())
        dt = dt[:, 0, :, None].expand(batch, self.n_heads, self.head_dim)
        dt = F.softplus(dt.float() + self.dt_bias.float()[:, None])
        dA = torch.exp(dt[..., None] * A[:, None, None])             # (B, H, P, N) by broadcast
        B = B.reshape(batch, self.n_groups, 1, self.d_state).expand(batch, self.n_groups, rep, self.d_state)
        B = B.reshape(batch, self.n_heads, self.d_state)
        C = C.reshape(batch, self.n_groups, 1, self.d_state).expand(batch, self.n_groups, rep, self.d_state)
        C = C.reshape(batch * self.n_heads, self.d_state, 1)
        hs = hs.reshape(batch, self.n_heads, self.head_dim)
        dbx = (dt[..., None] * B[:, :, None, :]) * hs[..., None]
        ssm.copy_(ssm * dA + dbx)
        y = torch.bmm(ssm.reshape(batch * self.n_heads, self.head_dim, self.d_state), C.to(ssm.dtype))
        y = y.view(batch, self.n_heads, self.head_dim)
        y = y + hs * self.D.float()[:, None]
        return self._output(y.reshape(batch, 1, -1), gate, dtype)
