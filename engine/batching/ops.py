"""Batchable work: what a row program yields when it needs the network (``result = yield op``).

An :class:`Op` carries one row's inputs; ops of one type with equal :meth:`Op.group_key` run in one
:meth:`Op.run_group` call. A group of one is what a request running alone computes, so batching never
changes it. Nested row programs pass ops up with :func:`relay` (or ``yield from`` when the inner one
yields nothing but ops).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class Op:
    """One row's share of a batched computation (``result = yield op`` in a row program)."""

    def group_key(self) -> Hashable:
        """Ops of one type with equal keys run in one :meth:`run_group` call (e.g. the network they
        use and the shapes that must agree)."""
        return ()

    @classmethod
    def run_group(cls, ops: Sequence[Any]) -> list[Any]:
        """The results of ``ops`` (all of this type, equal keys), one per op, in order."""
        raise NotImplementedError

    def run_alone(self) -> Any:
        return type(self).run_group([self])[0]


def relay(inner: Generator[Any, Any, T],
          on_item: Callable[[Any], Any] | None = None) -> Generator[Any, Any, T]:
    """``value = yield from relay(inner, on_item)``: run the row program ``inner`` inside another: its
    ops go up to the loop (their results back down); any other item goes to ``on_item``, whose value,
    when not None, is yielded up (an audio piece, say). Returns what ``inner`` returns."""
    send: Any = None
    try:
        while True:
            try:
                item = inner.send(send)
            except StopIteration as stop:
                return stop.value
            if isinstance(item, Op):
                send = yield item
                continue
            send = None
            out = on_item(item) if on_item is not None else None
            if out is not None:
                yield out
    finally:
        inner.close()


def run_now(inner: Generator[Any, Any, T]) -> T:
    """Drive a row program that yields only ops to its end, running each op alone (for callers
    outside a batch: tools, tests, the codec)."""
    send: Any = None
    while True:
        try:
            item = inner.send(send)
        except StopIteration as stop:
            return stop.value
        if not isinstance(item, Op):
            raise TypeError(f"run_now: the row program yielded {type(item).__name__}, not an Op")
        send = item.run_alone()
