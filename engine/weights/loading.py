"""Strict loading of a TensorSource into a torch module."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable

import torch

from ..errors import ModelError
from .source import TensorSource

MAX_LISTED = 10


def name_matcher(globs: Iterable[str]) -> Callable[[str], bool]:
    """Whether a name matches one of ``globs`` (``fnmatchcase``): plain names in a set, the patterns
    as one compiled expression (an ignore list of hundreds of quantized weights, checked against
    every tensor, stays one lookup per name)."""
    globs = tuple(globs)
    names = frozenset(g for g in globs if not any(c in g for c in "*?["))
    patterns = [g for g in globs if g not in names]
    regex = re.compile("|".join(fnmatch.translate(g) for g in patterns)) if patterns else None
    if regex is None:
        return names.__contains__
    return lambda name: name in names or regex.match(name) is not None


def _listing(names: list[str], describe=lambda n: n) -> str:
    shown = ", ".join(describe(n) for n in names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def check_module_weights(module: torch.nn.Module, source: TensorSource, *, what: str = "model",
                         ignore: Iterable[str] = ()) -> None:
    """Raise ModelError if ``source`` does not hold exactly ``module``'s state dict names and shapes."""
    ignored = name_matcher(ignore)
    expected = {n: tuple(t.shape) for n, t in module.state_dict(keep_vars=True).items() if not ignored(n)}
    present = [n for n in source.names() if not ignored(n)]
    present_set = set(present)
    missing = [n for n in expected if n not in present_set]
    unexpected = [n for n in present if n not in expected]
    misshapen = [n for n in present if n in expected and tuple(source.info(n).shape) != expected[n]]
    if not (missing or unexpected or misshapen):
        return
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing from the weights: {_listing(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected (not in the model): {_listing(unexpected)}")
    if misshapen:
        problems.append(f"{len(misshapen)} with the wrong shape: " + _listing(
            misshapen, lambda n: f"{n} (weights {tuple(source.info(n).shape)}, model {expected[n]})"))
    raise ModelError(
        f"the {what} weights from {source.describe()} do not match the {what}: " + "; ".join(problems),
        hint="check that the weights belong to this family and model size (config.json / GGUF metadata "
        "must match the checkpoint); a layout this family does not know needs a tensor adapter",
    )


@torch.no_grad()
def load_module_weights(module: torch.nn.Module, source: TensorSource, *, dtype: torch.dtype | None = None,
                        what: str = "model", ignore: Iterable[str] = (),
                        device: torch.device | str | None = None, keep_stored: Iterable[str] = ()) -> None:
    """Load ``source`` into ``module`` strictly (parameters and persistent buffers).

    Missing, unexpected or misshapen tensors raise one ModelError naming them (names
    matching an ``ignore`` glob are skipped both ways). Non-persistent buffers are not
    compared. ``dtype`` converts the module's floating-point parameters and buffers first.
    Tensors are copied one at a time into the module's storage (``copy_``), so peak memory
    is the module plus one tensor; parameters on the ``meta`` device are replaced by the
    loaded tensors instead (tied parameters stay tied), moved to ``device`` one at a time (no
    second host copy of the model). A tensor that ends up in memory of its own (cast,
    dequantized, copied to a device) has its pages of a memory-mapped file released at once,
    so the file's pages and the copies are not both resident. Names matching a ``keep_stored``
    glob load in the dtype they are stored in (lookup tables kept 16-bit under any compute dtype).
    """
    ignore = tuple(ignore)
    ignored, stored = name_matcher(ignore), name_matcher(keep_stored)
    check_module_weights(module, source, what=what, ignore=ignore)
    if dtype is not None:
        module.to(dtype)
    state = module.state_dict(keep_vars=True)
    replaced: dict[int, torch.Tensor] = {}
    for name, target in state.items():
        if ignored(name):
            continue
        want = target.dtype
        if stored(name) and source.info(name).dtype in ("F32", "F16", "BF16"):
            want = None  # the storage's own dtype (block-quantized storage: the compute dtype)
        if target.device.type == "meta":
            if id(target) not in replaced:
                value = source.get(name, want)
                if device is not None:
                    value = value.to(device)
                replaced[id(target)] = _assign(module, name, target, value)
                _release_if_copied(source, name, replaced[id(target)])
            else:
                _assign(module, name, target, replaced[id(target)])
            continue
        value = source.get(name, want)
        target.copy_(value)
        del value
        source.release(name)


def _release_if_copied(source: TensorSource, name: str, kept: torch.Tensor) -> None:
    """Release ``name``'s mapped pages unless the module keeps a view of them."""
    from .gguf_file import mapped_file

    if mapped_file(kept) is None:
        source.release(name)


def _assign(module: torch.nn.Module, name: str, old: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    owner_name, _, leaf = name.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    if leaf in owner._parameters:
        new = value if isinstance(value, torch.nn.Parameter) else torch.nn.Parameter(
            value.contiguous(), requires_grad=old.requires_grad)
        owner._parameters[leaf] = new
        return new
    owner._buffers[leaf] = value.contiguous()
    return owner._buffers[leaf]
