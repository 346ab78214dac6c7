"""Multi-head attention through torch's SDPA, as transformers' ``sdpa`` backend calls it.

transformers repeats grouped K/V heads (``repeat_kv``) whenever a mask is given and passes
boolean masks straight to ``scaled_dot_product_attention``; doing the same here keeps
float32 results bit-identical to upstream models run with the default attention.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, H_kv, S, D) -> (B, H_kv * n_rep, S, D), each KV head repeated ``n_rep`` times."""
    if n_rep == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
         scale: float | None = None, is_causal: bool = False) -> torch.Tensor:
    """Attention over (B, H, S, D) tensors; grouped K/V heads are repeated to match ``q``.

    ``mask`` is boolean (True = attend) or additive float, broadcastable to (B, H, S_q, S_k).
    Returns (B, S_q, H * D), the layout the output projection takes.
    """
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1:
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, is_causal=is_causal)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)
