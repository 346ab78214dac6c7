"""Ray for the layers that run on it (``audiocpp batch --ray``, ``audiocpp serve --ray``): the one place
that imports Ray with a clear error when it is missing, starts a local instance or joins a cluster,
and stops what it started. The engine itself never calls it; it lives here so that ``batch`` and
``server`` share it without importing each other.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from .errors import UsageError

#: What the ``ray`` extra installs, for the hint of every "Ray is missing" error.
RAY_EXTRA_HINT = "install the extra: pip install 'audiocpp[ray]' (Ray Data and Ray Serve)"


def import_ray(flags: str, modules: tuple[str, ...], what: str):
    """``ray`` with ``modules`` imported (``ray.data``, ``ray.serve``), or a UsageError (exit 2) that names
    ``flags`` and the ``ray`` extra. ``what``: the Ray library the flags need, for the message."""
    try:
        import ray

        for module in modules:
            importlib.import_module(module)
    except Exception as error:  # an ImportError, or a half-installed Ray failing inside its import
        missing_ray = isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] == "ray"
        detail = "" if missing_ray else f" (importing it fails: {type(error).__name__}: {error})"
        raise UsageError(f"{flags} need {what}, which is not installed{detail}",
                         hint=RAY_EXTRA_HINT) from None
    return ray


def connect(ray: Any, address: str | None, **options: Any) -> bool:
    """Join the cluster at ``address``, or start a local instance of this process's own (``address`` None:
    a bare ``ray.init()`` would join whatever cluster was started last on this machine,
    /tmp/ray/ray_current_cluster, another job's included); True when this call started or joined Ray
    (then :func:`disconnect` undoes it), False when Ray was already initialised."""
    if ray.is_initialized():
        return False
    init: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR,
                            "configure_logging": True, "log_to_driver": False, **options,
                            "address": address or "local"}
    try:
        ray.init(**init)
    except ConnectionError as error:
        raise UsageError(f"cannot connect to the Ray cluster at {address!r}: {error}",
                         hint="check --ray-address (e.g. ray://HEAD:10001 or HEAD:6379)") from None
    return True


def disconnect(ray: Any, started: bool) -> None:
    """Leave the cluster this process joined; a local instance it started stops with it (its GCS, raylet
    and workers end)."""
    if started and ray.is_initialized():
        ray.shutdown()


__all__ = ["RAY_EXTRA_HINT", "connect", "disconnect", "import_ray"]
