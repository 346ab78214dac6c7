"""Sampling helpers that draw from an explicit ``torch.Generator``.

Drawing with ``torch.rand(shape, generator=g)`` consumes the same MT19937 stream as
upstream's ``torch.rand_like`` on the global generator seeded with the same seed, as long
as the draws happen in the same order and shapes.

- ``gumbel_noise_like`` / ``keep_top_k``: OmniVoice's forms.
- ``legacy_top_k_top_p`` / ``exponential_race``: fish-speech / Audio8's candidate filter and
  sampler (``argmax(p / -log u)``, one uniform per vocabulary entry).

Uniforms are drawn on the generator's device and moved to the scores' device: a request's CPU
generator gives the same draws whichever device the model runs on (engine.device).
"""

from __future__ import annotations

import torch


def uniform(shape: torch.Size | tuple[int, ...], generator: torch.Generator | None, *, dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
    """``torch.rand(shape)`` from ``generator`` (drawn on its device), on ``device``."""
    where = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, dtype=dtype, device=where).to(device)


def uniform_rows(row_shape: tuple[int, ...], generators: list[torch.Generator | None], *, dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
    """One ``torch.rand((1, *row_shape))`` per row, each from that row's generator, stacked: every
    row of a batch draws what it draws alone."""
    draws = [uniform((1, *row_shape), g, dtype=dtype, device=device) for g in generators]
    return draws[0] if len(draws) == 1 else torch.cat(draws)


def uniform_like(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return uniform(x.shape, generator, dtype=x.dtype, device=x.device)


def gumbel_noise_like(x: torch.Tensor, generator: torch.Generator | None, eps: float = 1e-10) -> torch.Tensor:
    """``-log(-log(u + eps) + eps)``, the form OmniVoice uses."""
    u = uniform_like(x, generator)
    return -torch.log(-torch.log(u + eps) + eps)


def keep_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep exactly the ``k`` largest entries per row (ties broken as ``topk`` breaks them), -inf
    elsewhere."""
    values, indices = logits.topk(k, dim=-1)
    out = torch.full_like(logits, float("-inf"))
    out.scatter_(-1, indices, values)
    return out


def as_threshold(value: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A scalar as a 0-d tensor of ``like``'s dtype and device; a per-row ``[B, 1]`` tensor cast alike."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    return torch.tensor(value, dtype=like.dtype, device=like.device)


def legacy_top_k_top_p(scores: torch.Tensor, top_k: int | torch.Tensor,
                       top_p: float | torch.Tensor) -> torch.Tensor:
    """fish-speech / Audio8's candidate filter, in their order: sort descending, take the
    cumulative softmax of the sorted scores, drop ranks where ``cum > top_p`` or
    ``rank >= top_k`` (rank 0 always kept), -inf where dropped. ``scores`` is ``[B, V]``;
    ``top_k`` / ``top_p`` are one value or one per row (``[B, 1]``)."""
    sorted_scores, sorted_indices = torch.sort(scores, descending=True, dim=-1)
    cumulative = torch.cumsum(torch.softmax(sorted_scores, dim=-1), dim=-1)
    positions = torch.arange(sorted_scores.shape[-1], device=scores.device)
    threshold = as_threshold(top_p, cumulative)
    remove_sorted = (cumulative > threshold) | (positions >= top_k)
    remove_sorted[..., 0] = False
    remove = torch.zeros_like(remove_sorted).scatter(1, sorted_indices, remove_sorted)
    return scores.masked_fill(remove, float("-inf"))


def exponential_race(scores: torch.Tensor, generator: torch.Generator | None | list[torch.Generator | None]
                     ) -> torch.Tensor:
    """Sample one index per row of ``scores`` ``[B, V]``: ``argmax(softmax(scores) / -log u)``
    with ``u ~ U[0, 1)`` of the same shape drawn from ``generator`` (the exponential race, a
    categorical draw; Audio8's ``_sample``). A list of generators, one per row: each row draws
    its ``[1, V]`` from its own (as it would alone)."""
    probabilities = torch.softmax(scores, dim=-1)
    if isinstance(generator, list):
        random = uniform_rows(tuple(probabilities.shape[1:]), generator, dtype=probabilities.dtype,
                              device=probabilities.device)
    else:
        random = uniform(probabilities.shape, generator, dtype=probabilities.dtype,
                         device=probabilities.device)
    return torch.argmax(probabilities / -torch.log(random), dim=-1)
