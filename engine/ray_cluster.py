"""Ray for the layers that run on it (``audiocpp batch --ray``, ``audiocpp book`` on Ray, ``audiocpp serve
--ray``): the one place that imports Ray with a clear error when it is missing, starts a local instance
or joins a cluster, and stops what it started; and :class:`ModelActor`, the body of every audiocpp
actor on a cluster. The engine itself never calls it; it lives here so that ``batch`` and ``server``
share it without importing each other.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .loader import ModelRef, load_planned, plan_load

if TYPE_CHECKING:
    from .loaded_model import LoadedModel

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


class ModelActor:
    """The body of every audiocpp actor on a Ray cluster: a Ray Data actor of ``batch --ray`` and of
    ``book`` on Ray (batch.ray_runner.SynthActor), a model replica of ``serve --ray``
    (server.ray_serve.ModelReplica). It loads the model once, as every front end loads it
    (``engine.loader``: planned, its load options checked, read); requests run on ``model.executor()``,
    the executor a local server or batch worker uses.

    A model that does not load is kept in ``failure`` rather than raised here: a constructor that raises
    is restarted by Ray over and over. The subclass reports it its own way (the batch's rows; a replica
    fails its deployment once)."""

    def __init__(self, model: str | Path | None, family: str | None, load_options: dict[str, Any], *,
                 default_demo: bool = False) -> None:
        self.name = f"ray-actor-{os.getpid()}"
        self.model: LoadedModel | None = None
        self.demo = False
        self.failure: Exception | None = None
        try:
            plan = plan_load(ModelRef(model, family, default_demo=default_demo), dict(load_options))
            self.demo = plan.demo
            self.model = load_planned(plan)
        except Exception as error:  # noqa: BLE001 - kept for the subclass to report (see above)
            self.failure = error

    @staticmethod
    def node_id() -> str:
        """The Ray node this actor runs on ("" outside Ray)."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


__all__ = ["RAY_EXTRA_HINT", "ModelActor", "connect", "disconnect", "import_ray"]
