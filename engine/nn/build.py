"""What every family does to get a network into torch: the compute dtype of a session, building
a module on the meta device and loading it strictly, and one copy of a network per dtype.

- :func:`torch_dtype`: the session option ``compute_dtype`` (any spelling of the preset:
  ``float32``/``fp32``/``float``, ``bfloat16``/``bf16``, ``float16``/``fp16``/``half``) -> torch dtype.
- :func:`load_on_meta`: build on ``meta`` (no memory, no random init), load strictly
  (``engine.weights.load_module_weights``: every missing, unexpected or misshapen tensor is one
  ``ModelError``), then :func:`materialize` (nothing left on ``meta``; floats in ``dtype``).
- :class:`PerDtype`: the network computing in a dtype, made once on first use.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

import torch

from ..errors import ModelError
from ..memory import return_freed_memory
from ..weights.loading import load_module_weights
from ..weights.source import TensorSource

M = TypeVar("M", bound=torch.nn.Module)
T = TypeVar("T")

#: The initializers ``nn`` modules call in ``reset_parameters``.
_INITS = ("normal_", "uniform_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
          "xavier_normal_", "zeros_", "ones_", "constant_", "orthogonal_")
_init_lock = threading.Lock()
_init_depth = 0


@contextlib.contextmanager
def meta_device() -> Iterator[None]:
    """``torch.device("meta")`` without initializing what it builds: every weight is loaded
    afterwards. On meta, ``nn.init``'s random fills go through torch's reference implementations,
    whose first use imports ``torch._dynamo`` (1.2 s of every process's start-up, for values that
    do not exist); here they return the meta tensor untouched (real tensors, any thread's, are
    initialized as before)."""
    global _init_depth
    with _init_lock:
        if _init_depth == 0:
            for name in _INITS:
                original = getattr(torch.nn.init, name)
                skip = functools.wraps(original)(
                    lambda tensor, *args, _original=original, **kwargs:
                    tensor if tensor.is_meta else _original(tensor, *args, **kwargs))
                skip.__wrapped_init__ = original  # type: ignore[attr-defined]
                setattr(torch.nn.init, name, skip)
        _init_depth += 1
    try:
        with torch.device("meta"):
            yield
    finally:
        with _init_lock:
            _init_depth -= 1
            if _init_depth == 0:
                for name in _INITS:
                    setattr(torch.nn.init, name, getattr(torch.nn.init, name).__wrapped_init__)


def build_on_meta(factory: Callable[[], M]) -> M:
    """``factory()`` with its tensors on the meta device (those it creates on an explicit
    device, e.g. a small derived buffer, stay real), not initialized (:func:`meta_device`)."""
    with meta_device():
        return factory()


def materialize(module: torch.nn.Module, dtype: torch.dtype | None = None, *, what: str = "model",
                keep_stored: Iterable[str] = ()) -> None:
    """Check that loading replaced every meta tensor; cast floating parameters to ``dtype``
    (except those matching a ``keep_stored`` glob)."""
    import fnmatch

    for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
        if tensor.device.type == "meta":
            raise ModelError(f"{what} tensor {name!r} was not loaded")
    if dtype is not None:
        keep = tuple(keep_stored)
        for name, p in module.named_parameters():
            if (p.is_floating_point() and p.dtype != dtype
                    and not any(fnmatch.fnmatchcase(name, g) for g in keep)):
                p.data = p.data.to(dtype)


def load_on_meta(factory: Callable[[], M], source: TensorSource, *, dtype: torch.dtype | None = torch.float32,
                 what: str = "model", ignore: Iterable[str] = (), device: torch.device | str | None = None,
                 quantize: Iterable[str] = (), keep_stored: Iterable[str] = (),
                 stored: bool | None = None) -> M:
    """Build ``factory()`` on meta, load ``source`` into it strictly with its floating tensors in
    ``dtype`` (None: the dtypes the module was built with) on ``device`` (default: the CPU),
    materialize.

    ``quantize``: globs of module names whose ``nn.Linear`` layers keep a Q8_0 / Q4_0 weight
    quantized (``engine.nn.linear.choice``) when ``stored`` (the compute mode's:
    ``engine.device.ComputeMode``; None: when ``dtype`` is a 16-bit compute dtype); otherwise, as in
    float32's exact mode, every weight is dequantized. Names and shapes are checked strictly first,
    quantized tensors included. ``keep_stored``: globs of tensor names kept in the dtype they are
    stored in (16-bit lookup tables under any compute dtype)."""
    module = build_on_meta(factory)
    ignore = tuple(ignore)
    globs = tuple(quantize)
    if stored is None:
        stored = dtype in (torch.bfloat16, torch.float16)
    if globs and stored:
        from ..weights.loading import check_module_weights
        from .linear.choice import quantize_linears

        check_module_weights(module, source, what=what, ignore=ignore)
        ignore += tuple(quantize_linears(module, source, globs, dtype=dtype,
                                         device=(torch.device(device) if device is not None
                                                 else torch.device("cpu"))))
    keep = tuple(keep_stored)
    load_module_weights(module, source, dtype=dtype, what=what, ignore=ignore, device=device,
                        keep_stored=keep)
    materialize(module, dtype, what=what, keep_stored=keep)
    if device is not None:
        module.to(device)  # what the factory built outside meta (small derived buffers)
    source.release_all()  # pages read for copies (folded, cast) leave; views read theirs back when used
    return module


class PerDtype(Generic[T]):
    """One ``T`` per compute dtype, made by ``make(dtype)`` on first use and kept (thread-safe:
    two sessions asking at once get the same object)."""

    def __init__(self, make: Callable[[torch.dtype], T], ready: dict[torch.dtype, T] | None = None) -> None:
        self._make = make
        self._items: dict[torch.dtype, T] = dict(ready or {})
        self._lock = threading.Lock()

    def get(self, dtype: torch.dtype) -> T:
        item = self._items.get(dtype)
        if item is None:
            with self._lock:
                item = self._items.get(dtype)
                if item is None:
                    item = self._items[dtype] = self._make(dtype)
                    return_freed_memory()  # building freed its load-time temporaries
        return item

    def __contains__(self, dtype: torch.dtype) -> bool:
        return dtype in self._items

    def __iter__(self) -> Iterator[torch.dtype]:
        """The dtypes made so far."""
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)
