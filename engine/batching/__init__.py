"""Many requests in one forward pass: row programs, batchable ops, the batch loop and the batcher.

A family session's ``_synthesize`` is a *row program*: a generator that yields audio pieces and,
where it needs heavy compute, :class:`Op` objects (``result = yield op``). Run alone, the engine
executes each op at once (a group of one). In a batch, the :class:`BatchLoop` advances every row
until it waits on an op, runs the waiting ops in groups of compatible ones (one call, many rows),
hands each row its result, and repeats; rows join before any step and leave when they end. A
family without ops still works in a batch: its rows simply run one after another.

- :mod:`.ops`: the op protocol and :func:`relay` for nested row programs;
- :mod:`.loop`: :class:`BatchLoop` (one thread, no locks) and the per-row bookkeeping;
- :mod:`.batcher`: :class:`Batcher`, thread-safe, requests join and leave while it runs.
"""

from .batcher import Batcher, BatchJob
from .loop import BatchLoop, BatchResults, Cancelled, RowEvent
from .ops import Op, relay

__all__ = ["BatchJob", "BatchLoop", "BatchResults", "Batcher", "Cancelled", "Op", "RowEvent", "relay"]
