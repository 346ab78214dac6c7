"""Devices: the ``device`` load option (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto``) and the
per-device defaults of a loaded model.

- :func:`resolve_device` turns the option into a ``torch.device``; a device this machine does
  not have is a ``UsageError`` that names the ones it has (:func:`available_devices`). Without the
  option a model loads on ``$AUDIOCPP_DEVICE``, else on the CPU: the CPU stays the default (the
  exact float32 mode, the same numbers on every machine) until a user asks for a GPU.
- :func:`default_compute_mode` is the :class:`ComputeMode` a session gets when it does not ask for
  one (``compute_dtype=auto``): on the CPU float32 for F32 weights (the exact mode); for BF16, F16
  and block-quantized weights bfloat16 where the CPU computes it in hardware (torch's CPU float16
  GEMM is about 10x slower than bfloat16), else float32 with block-quantized weights kept stored
  for the block kernels (``float32-stored``); on a GPU the dtype the family's upstream runs in
  there (``gpu_dtype``), unless the weights are F32.
- :func:`storage_dtype` summarises what a weights source stores (by bytes of its large tensors).

Random draws stay on the CPU generator of the request (``PreparedRequest.generator``) and their
results move to the device, so a seed gives the same draws on every device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    import torch

    from .weights.source import TensorSource

DEVICE_OPTION = "device"
#: the default of the ``device`` option (else ``cpu``) and of ``compute_dtype=auto`` (else per device)
DEVICE_ENV = "AUDIOCPP_DEVICE"
COMPUTE_DTYPE_ENV = "AUDIOCPP_COMPUTE_DTYPE"
DEVICE_HINT = "use --device cpu or --load-option device=cpu (auto: the best device this machine has)"
#: Storage types of block-quantized weights that the engine keeps quantized in memory.
QUANTIZED_STORAGE = frozenset({"Q8_0", "Q4_0"})


def available_devices() -> list[str]:
    """The devices this machine has, as the ``device`` option spells them (``cpu`` first)."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    return found


def best_device() -> str:
    """``auto``: the first CUDA device, else Apple's MPS, else the CPU (upstream VoxCPM's order)."""
    found = available_devices()
    for prefix in ("cuda", "mps"):
        for name in found:
            if name.startswith(prefix):
                return name
    return "cpu"


def resolve_device(value: Any = None) -> torch.device:
    """The ``torch.device`` of a ``device`` option value (None or ``""``: ``$AUDIOCPP_DEVICE``,
    else ``cpu``; ``auto``: :func:`best_device`).

    ``cuda`` is ``cuda:0``; a device that is not there, or a spelling torch does not know, is a
    ``UsageError`` naming the devices this machine has."""
    import os

    import torch

    if isinstance(value, torch.device):
        text = str(value)
    else:
        if value is None or not str(value).strip():
            value = os.environ.get(DEVICE_ENV, "").strip() or "cpu"
        text = str(value).strip().lower()
    if text in ("", "auto"):
        text = best_device()
    found = available_devices()
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise UsageError(f"unknown device {text!r}",
                         hint=f"use cpu, cuda, cuda:N, mps or auto; this machine has: "
                         f"{', '.join(found)}") from None
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    name = str(device) if device.type != "mps" else "mps"
    if device.type not in ("cpu", "cuda", "mps") or (device.type == "cpu" and device.index not in (None, 0)):
        raise UsageError(f"device {text!r} is not supported",
                         hint=f"use cpu, cuda, cuda:N, mps or auto; this machine has: {', '.join(found)}")
    if device.type == "cpu":
        return torch.device("cpu")
    if name not in found:
        what = "no CUDA GPU" if device.type == "cuda" and not any(f.startswith("cuda") for f in found) else \
            "no MPS device" if device.type == "mps" else f"no {name}"
        raise UsageError(f"device {text!r} is not available: this machine has {what} "
                         f"(available: {', '.join(found)})", hint=DEVICE_HINT)
    return device


def device_of(options: dict[str, Any] | None) -> torch.device:
    """The device a family loads on, from its typed load options."""
    return resolve_device((options or {}).get(DEVICE_OPTION))


def storage_dtype(source: TensorSource, names: Iterable[str] | None = None, *, min_numel: int = 4096) -> str:
    """The storage type holding most bytes of ``source``'s tensors of at least ``min_numel``
    elements (the weight matrices, not norms or biases): ``F32``, ``BF16``, ``F16``, ``Q8_0``...
    Empty or integer-only sources give ``F32``."""
    totals: dict[str, int] = {}
    for name in source.names() if names is None else names:
        info = source.info(name)
        numel = 1
        for d in info.shape:
            numel *= int(d)
        if numel < min_numel or info.dtype.startswith(("I", "U", "BOOL")):
            continue
        totals[info.dtype] = totals.get(info.dtype, 0) + numel
    if not totals:
        return "F32"
    return max(totals.items(), key=lambda kv: kv[1])[0]


@dataclass(frozen=True)
class ComputeMode:
    """How a session's networks compute: ``dtype``, the dtype of their activations and float
    weights, and ``stored``: linear weights that a package stores block-quantized (Q8_0, Q4_0) stay
    so in memory and run on the block kernels (``engine.nn.linear.choice``); False widens every weight to
    ``dtype`` at load (float32 then is the exact mode). The 16-bit modes always keep them stored;
    ``float32-stored`` is float32 arithmetic over the stored blocks (what ``auto`` picks on a CPU
    that emulates bfloat16). The session option ``compute_dtype`` names a mode (:attr:`name`)."""

    dtype: Any  # torch.dtype
    stored: bool = False

    @property
    def name(self) -> str:
        base = str(self.dtype).removeprefix("torch.")
        return f"{base}-stored" if self.stored and base == "float32" else base

    def __str__(self) -> str:
        return self.name


def mode_of(dtype: torch.dtype, stored: bool = False) -> ComputeMode:
    """The mode computing in ``dtype``: 16-bit dtypes keep block-quantized weights stored, float32
    does when ``stored``."""
    import torch

    return ComputeMode(dtype, stored or dtype in (torch.bfloat16, torch.float16))


def default_compute_mode(device: torch.device, stored: str, *, gpu_dtype: torch.dtype | None = None,
                         bf16_for_quantized: bool = True) -> ComputeMode:
    """The mode of ``compute_dtype=auto`` for weights stored as ``stored`` on ``device``.

    CPU: F32 -> float32 (exact). BF16, F16 and block-quantized (Q8_0, Q4_0...) -> bfloat16 where
    the CPU computes bfloat16 in hardware at the level the process runs (``engine.nn.kernels.cpu_isa``:
    AVX512-BF16, AMX, ARM BF16); elsewhere torch emulates bfloat16 GEMMs hundreds of times slower
    than float32, so BF16 / F16 weights are widened to float32 and block-quantized ones compute in
    ``float32-stored`` (their linears on the block kernel, which takes float32 rows). A family whose
    block kernel path beats its bfloat16 path even there passes ``bf16_for_quantized=False``
    (``FamilyPlugin.cpu_bf16_for_quantized``): its quantized packages compute in ``float32-stored``
    on every CPU.
    GPU: F32 -> float32 unless the family's upstream computes in ``gpu_dtype`` there; 16-bit
    storage -> that dtype (F16 -> float16, BF16 -> bfloat16); quantized -> ``gpu_dtype`` or bfloat16.
    """
    import torch

    if device.type == "cpu":
        return compute_mode(cpu_auto_mode_name(stored, bf16_for_quantized=bf16_for_quantized))
    if stored == "F16":
        return mode_of(torch.float16)
    if stored == "BF16":
        return mode_of(torch.bfloat16)
    if stored in ("F32", "F64"):
        return mode_of(gpu_dtype or torch.float32)
    return mode_of(gpu_dtype or torch.bfloat16)


def cpu_auto_mode_name(stored: str, *, bf16_for_quantized: bool = True) -> str:
    """The name of ``compute_dtype=auto``'s mode on this CPU for weights stored as ``stored``
    (without importing torch: ``audiocpp families`` prints it)."""
    if stored in ("F32", "F64"):
        return "float32"
    from .nn.kernels.cpu_isa import native_bf16

    if native_bf16() and (bf16_for_quantized or stored not in QUANTIZED_STORAGE):
        return "bfloat16"
    return "float32-stored" if stored in QUANTIZED_STORAGE else "float32"


def default_compute_dtype(device: torch.device, stored: str, *,
                          gpu_dtype: torch.dtype | None = None) -> torch.dtype:
    """The dtype of :func:`default_compute_mode`."""
    return default_compute_mode(device, stored, gpu_dtype=gpu_dtype).dtype


def check_dtype_on_device(dtype: torch.dtype, device: torch.device) -> None:
    """Refuse what a device cannot compute in (float64 on MPS)."""
    import torch

    if device.type == "mps" and dtype == torch.float64:
        raise UsageError("MPS does not compute in float64", hint="use compute_dtype float32 or bfloat16")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (timings on GPUs)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def auto_compute_mode(device: torch.device, layout: str, source: TensorSource | None = None, *,
                      gpu_dtype: torch.dtype | None = None, bf16_for_quantized: bool = True) -> ComputeMode:
    """``compute_dtype=auto`` for a model loaded from ``layout`` (``package``, ``gguf`` or
    ``folder``): packages and GGUFs by what ``source`` (the dominant network's weights) stores;
    upstream snapshot folders as F32 (the exact mode on the CPU, whatever the checkpoint's dtype).
    ``$AUDIOCPP_COMPUTE_DTYPE`` pins it (any value of the option but ``auto``); ``bf16_for_quantized``:
    :func:`default_compute_mode`."""
    import os

    forced = os.environ.get(COMPUTE_DTYPE_ENV, "").strip()
    if forced and forced.lower() != "auto":
        try:
            return compute_mode(forced)
        except ValueError as exc:
            raise UsageError(f"{COMPUTE_DTYPE_ENV}={forced!r}: {exc}") from None
    stored = storage_dtype(source) if layout in ("package", "gguf") and source is not None else "F32"
    return default_compute_mode(device, stored, gpu_dtype=gpu_dtype, bf16_for_quantized=bf16_for_quantized)


def auto_compute_dtype(device: torch.device, layout: str, source: TensorSource | None = None, *,
                       gpu_dtype: torch.dtype | None = None) -> torch.dtype:
    """The dtype of :func:`auto_compute_mode`."""
    return auto_compute_mode(device, layout, source, gpu_dtype=gpu_dtype).dtype


def compute_mode(name: str | ComputeMode | None, default: ComputeMode | None = None) -> ComputeMode:
    """The mode a ``compute_dtype`` value names (None, ``""`` and ``auto`` -> ``default``, the
    exact float32 mode unless given: a loaded model's default is :func:`auto_compute_mode`);
    ``float32`` is the exact mode, ``float32-stored`` keeps block-quantized weights stored."""
    import torch

    if isinstance(name, ComputeMode):
        return name
    if isinstance(name, torch.dtype):
        return mode_of(name)
    if name is None or name == "" or (isinstance(name, str) and name.strip().lower() == "auto"):
        return default if default is not None else mode_of(torch.float32)
    dtype = torch_dtype(name)
    return mode_of(dtype, stored=str(name).strip().lower().endswith("-stored"))


def torch_dtype(name: str | torch.dtype | None, default: torch.dtype | None = None) -> torch.dtype:
    """The torch dtype of a ``compute_dtype`` value (None, ``""`` and ``auto`` -> ``default``, float32
    unless given: the loaded model's per-device default is :func:`default_compute_dtype`)."""
    import torch

    from .spec.model_spec import PRESET_SPELLINGS

    if name is None or name == "" or (isinstance(name, str) and name.strip().lower() == "auto"):
        return torch.float32 if default is None else default
    if isinstance(name, torch.dtype):
        return name
    spellings = PRESET_SPELLINGS["compute_dtype"]
    canonical = spellings.get(str(name).strip().lower())
    if canonical is None:
        raise ValueError(f"unknown compute dtype {name!r} (use one of: {', '.join(spellings)})")
    return getattr(torch, canonical.removesuffix("-stored"))
