"""Rotary position embeddings.

``rotate_half`` / :func:`apply_rotary` is the NeoX convention (halves rotated) used by
Qwen3 and MiniCPM. :func:`interleaved_rope_table` / :func:`apply_interleaved_rope` are the
interleaved-pair convention (GPT-J, fish-speech, Audio8). LongRoPE tables are in ``longrope.py``.
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    """``1 / base^(2i/d)`` in float32, computed as transformers does."""
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, compute_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin``; optionally computed in ``compute_dtype`` and cast back."""
    dtype = x.dtype
    if compute_dtype is not None:
        x = x.to(compute_dtype)
    out = (x * cos) + (rotate_half(x) * sin)
    return out.to(dtype)


# -- interleaved pairs (GPT-J / fish-speech style) ------------------------------------------
def interleaved_rope_table(length: int, head_dim: int, base: float, dtype: torch.dtype = torch.float32,
                           device: torch.device | str | None = None) -> torch.Tensor:
    """``[length, head_dim // 2, 2]`` (cos, sin) of pair ``i`` at each position, built as
    fish-speech / Audio8 build ``freqs_cis`` (``torch.polar`` in float32), then cast to ``dtype``
    (Audio8 keeps the table in bfloat16)."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float()[: head_dim // 2] / head_dim))
    phases = torch.outer(torch.arange(length, device=device), freqs)
    values = torch.polar(torch.ones_like(phases), phases)
    return torch.stack((values.real, values.imag), dim=-1).to(dtype)


def apply_interleaved_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate the pairs ``(x[2i], x[2i+1])`` of ``x`` ``[B, T, H, D]`` by ``table``
    (``[T, D/2, 2]`` or per row ``[B, T, D/2, 2]``), in float32, cast back to ``x``'s dtype:
    ``(x0 c - x1 s, x1 c + x0 s)``, computed as ``(x0, x1) * c + (x1, x0) * (-s, s)`` in a few
    whole-tensor ops instead of a dozen per-component ones (the same bits: ``a + b * -s`` is
    ``a - b * s`` exactly; a decode step runs this twice per layer)."""
    shaped = x.float().reshape(*x.shape[:-1], -1, 2)
    if table.ndim == 3:
        table = table[None, :, None]
    elif table.ndim == 4:
        table = table[:, :, None]
    else:
        raise ValueError(f"unexpected RoPE table shape {tuple(table.shape)}")
    sin = table[..., 1:]
    out = shaped * table[..., :1] + shaped.flip(-1) * torch.cat((-sin, sin), dim=-1)
    return out.flatten(3).to(x.dtype)
