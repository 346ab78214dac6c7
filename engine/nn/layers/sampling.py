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

from functools import cache

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
    n = ordered.shape[1]
    if vocab is None or vocab <= n:
        return torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1)
    return torch.cumsum(padded_softmax(ordered, vocab)[:, :n], dim=-1)


#: Lane-aligned widths: torch's vectorized softmax sums each entry in the lane of its index mod
#: the vector width, so a row cut at a multiple of this many entries keeps every entry's lane.
ALIGN = 64


def padded_softmax(x: torch.Tensor, width: int) -> torch.Tensor:
    """``softmax`` of ``x`` ``[B, n]`` padded with -inf to ``width`` columns, its first ``n``
    columns. The padding adds exact zeros to the sum, so on the CPU it stops at the first multiple
    of :data:`ALIGN` (the same bits, checked once per dtype: :func:`_short_padding_exact`)."""
    rows, n = x.shape
    short = min(width, -(-n // ALIGN) * ALIGN)
    if short < width and not (x.device.type == "cpu" and _short_padding_exact(x.dtype)):
        short = width
    padded = torch.full((rows, short), float("-inf"), dtype=x.dtype, device=x.device)
    padded[:, :n] = x
    return torch.softmax(padded, dim=-1)[:, :n]


@cache
def _short_padding_exact(dtype: torch.dtype) -> bool:
    """Whether softmax over a row cut at a multiple of :data:`ALIGN` gives the whole row's bits."""
    source = torch.Generator().manual_seed(0)
    for rows, n, width in ((1, 4097, 155776), (8, 1000, 70000), (3, 64, 1000)):
        x = (torch.randn(rows, n, generator=source) * 5).to(dtype)
        x[torch.rand(rows, n, generator=source) < 0.3] = float("-inf")
        x[:, 0] = 1.0
        whole = torch.full((rows, width), float("-inf"), dtype=dtype)
        whole[:, :n] = x
        short = -(-n // ALIGN) * ALIGN
        if not torch.equal(torch.softmax(whole, -1)[:, :short], torch.softmax(whole[:, :short], -1)):
            return False
    return True


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
