"""One synthesis at a time per loaded model: the guard every session of a model shares.

Sessions of one ``LoadedModel`` share state that is not safe to use from several threads at
once: VoxCPM2's static KV caches, the per-dtype copies of networks built on first use, the
reference cache. The engine therefore serializes them: ``Session.stream`` (and ``run``, which
streams) holds the model's guard from preparing the request to the final event,
``create_session`` holds it while the family builds the session, and the voice-prompt hooks
(``load_voice_prompt``, ``encode_voice_prompt``, ``decode_voice_prompt``) hold it too. Different
models run in parallel; threads using one model wait their turn.

Within one thread the hooks re-enter freely (a stream loads its voice prompt), but a second
``stream``/``run`` of the same model started while a first one is still open in the same
thread would wait for itself forever: that is refused with a UsageError instead.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])
_CREATE = threading.Lock()


class ModelGuard:
    """A lock that knows its owner thread (to refuse a self-deadlock and to allow re-entry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    @property
    def held_here(self) -> bool:
        """Whether the calling thread holds the guard."""
        return self._owner == threading.get_ident()

    @contextmanager
    def held(self, *, reentrant: bool = False, what: str = "this model") -> Iterator[None]:
        """Hold the guard for the block. ``reentrant``: a thread that already holds it goes on;
        otherwise that is a UsageError (a stream of the model is still open in this thread)."""
        if self.held_here:
            if reentrant:
                yield
                return
            raise UsageError(f"{what} is already synthesizing in this thread (a stream that was not "
                             "finished or closed)", hint="finish the first stream, or call its close(), "
                             "before starting another run of the same model")
        self._lock.acquire()
        self._owner = threading.get_ident()
        try:
            yield
        finally:
            self._owner = None
            self._lock.release()


def model_guard(model: Any) -> ModelGuard:
    """The guard of ``model``, made on first use (families need not call a base ``__init__``)."""
    guard = model.__dict__.get("_audiocpp_guard")
    if guard is None:
        with _CREATE:
            guard = model.__dict__.setdefault("_audiocpp_guard", ModelGuard())
    return guard


def guarded(method: F) -> F:
    """``method`` of a LoadedModel, run holding the model's guard (re-entrant in its thread)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with model_guard(self).held(reentrant=True):
            return method(self, *args, **kwargs)

    wrapper.__audiocpp_guarded__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
