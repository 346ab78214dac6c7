"""Row programs and batchable ops: what a family's ``_synthesize`` is made of.

A family session's ``_synthesize`` is a *row program*: a generator that yields audio pieces and, where it
needs heavy compute, :class:`Op` objects (``result = yield op``). Run alone, each op runs at once (a group
of one). In a batch, the executor's loop (engine/execution/loop.py) advances every row until it waits on
an op, runs the waiting ops in groups of compatible ones (one call, many rows), hands each row its result,
and repeats; rows join before any step and leave when they end. A family without ops still works in a
batch: its rows simply take turns.

:mod:`.ops`: the op protocol, :func:`relay` for nested row programs, :func:`run_now` outside a batch.
"""

from .ops import Op, relay, run_now

__all__ = ["Op", "relay", "run_now"]
