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

import numpy as np
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


def legacy_top_k_top_p(scores: torch.Tensor, top_k: int | torch.Tensor, top_p: float | torch.Tensor,
                       vocab: int | None = None) -> torch.Tensor:
    """fish-speech / Audio8's candidate filter, in their order: sort descending, take the
    cumulative softmax of the sorted scores, drop ranks where ``cum > top_p`` or
    ``rank >= top_k`` (rank 0 always kept), -inf where dropped. ``scores`` is ``[B, V]``;
    ``top_k`` / ``top_p`` are one value or one per row (``[B, 1]``). ``vocab``: the softmax is
    taken over the sorted scores padded with -inf to that width (Audio8's compact semantic scores
    of a full-vocabulary head, so the softmax's sum is upstream's).

    On the CPU the cut is found from the sorted values alone (:func:`kept_by_rank`); rows it cannot
    decide go through ``torch.sort`` as upstream does."""
    fast = kept_by_rank(scores, top_k, top_p, vocab)
    if fast is None:
        sorted_scores, sorted_indices = torch.sort(scores, descending=True, dim=-1)
        cumulative = _cumulative(sorted_scores, vocab)
        return scores.masked_fill(_removed(sorted_indices, cumulative, top_k, top_p), float("-inf"))
    keep, undecided, cumulative = fast
    out = scores.masked_fill(~keep, float("-inf"))
    if bool(undecided.any()):  # torch.sort's order of the tied scores decides; same sorted values
        rows = undecided.nonzero().flatten()
        tied = scores[rows]
        sorted_indices = torch.sort(tied, descending=True, dim=-1).indices
        remove = _removed(sorted_indices, cumulative[rows], _rows_of(top_k, rows), _rows_of(top_p, rows))
        out[rows] = tied.masked_fill(remove, float("-inf"))
    return out


def _rows_of(value: int | float | torch.Tensor, rows: torch.Tensor) -> int | float | torch.Tensor:
    return value[rows] if isinstance(value, torch.Tensor) and value.ndim == 2 else value


def _cumulative(ordered: torch.Tensor, vocab: int | None) -> torch.Tensor:
    """The cumulative softmax of scores sorted in descending order (padded to ``vocab`` with -inf)."""
    rows, n = ordered.shape
    if vocab is None or vocab <= n:
        return torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1)
    padded = torch.full((rows, vocab), float("-inf"), dtype=ordered.dtype, device=ordered.device)
    padded[:, :n] = ordered
    return torch.cumsum(torch.softmax(padded, dim=-1)[:, :n], dim=-1)


def _removed(sorted_indices: torch.Tensor, cumulative: torch.Tensor, top_k: int | torch.Tensor,
             top_p: float | torch.Tensor) -> torch.Tensor:
    """The drop mask in the scores' order, from ``torch.sort``'s indices and the cumulative
    softmax of the sorted scores (upstream's arithmetic)."""
    positions = torch.arange(cumulative.shape[-1], device=cumulative.device)
    remove_sorted = (cumulative > as_threshold(top_p, cumulative)) | (positions >= top_k)
    remove_sorted[..., 0] = False
    return torch.zeros_like(remove_sorted).scatter(1, sorted_indices, remove_sorted)


def kept_by_rank(scores: torch.Tensor, top_k: int | torch.Tensor, top_p: float | torch.Tensor,
                 vocab: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """What :func:`legacy_top_k_top_p` keeps, from the sorted *values* alone (numpy's vectorized
    sort, ~25x faster on a CPU than ``torch.sort`` with its indices): ``(keep [B, V], undecided
    [B], cumulative [B, V])``, the last the cumulative softmax of the sorted scores; None off the
    CPU. The kept ranks are a prefix (the cumulative softmax never decreases), so the kept entries
    are those at least the last kept value; the softmax and cumsum run on the same sorted values as
    upstream's, so the cut is the same bit for bit. A row is undecided where that does not tell
    which entries are kept: a NaN, or equal scores on both sides of the cut (which of them
    ``torch.sort`` puts first is its own; common with bfloat16 scores)."""
    if scores.device.type != "cpu" or scores.ndim != 2 or scores.shape[-1] == 0:
        return None
    as_float = scores.float() if scores.dtype != torch.float32 else scores
    values = np.sort(as_float.numpy(), axis=-1)[:, ::-1]
    ordered = torch.from_numpy(np.ascontiguousarray(values)).to(scores.dtype)
    n = ordered.shape[1]
    cumulative = _cumulative(ordered, vocab)
    within = (~(cumulative > as_threshold(top_p, cumulative))).sum(-1, keepdim=True)
    limit = torch.as_tensor(top_k).reshape(-1, 1).to(within.dtype)
    kept = torch.clamp(torch.minimum(within, limit), min=1, max=n)
    last = ordered.gather(1, kept - 1)
    after = ordered.gather(1, kept.clamp(max=n - 1))
    undecided = ((kept < n) & (after == last)).flatten() | torch.isnan(ordered[:, 0])  # NaNs sort first
    return scores >= last, undecided, cumulative


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
