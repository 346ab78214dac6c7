"""Row programs and batchable ops: what a family's ``_synthesize`` is made of (:mod:`.ops`: the op
protocol, :func:`relay` for nested row programs, :func:`run_now` outside a batch). The executor's loop
runs them (engine/execution/loop.py); a family without ops still works in a batch: its rows take turns.
"""

from .ops import Op, relay, run_now

__all__ = ["Op", "relay", "run_now"]
