"""One way to load a model: resolve the reference, choose the family, check, load.

Every front end goes through here: ``audiocpp.engine.load()``, the command line (synthesis and the
codec tool), ``audiocpp serve`` and ``audiocpp batch`` (its driver plans, its local workers and Ray
actors load what it planned). Two steps, so that callers can check everything else between them:

1. :func:`plan_load`: a model name (a Hugging Face repo id or a spec's package id) becomes its cached
   or downloaded snapshot (``engine.hub``; a family that cannot run is refused before any download),
   the family is the one chosen or detected (or, with no model at all, the chosen family's demo
   model), the family must be runnable, the load options are checked against its spec and a device
   the machine lacks is refused. Nothing slow happens unless a download is due.
2. :func:`load_planned`: the family loads the files; when the user chose the family and the files
   are not its, the error says whose they look like. Freed memory is handed back to the system.

The demo fallback lives here only: no model path means the family's demo model, with
:attr:`LoadPlan.note` saying so (random weights: the audio is not speech).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import AudiocppError, ModelError, UsageError

if TYPE_CHECKING:
    from .loaded_model import LoadedModel
    from .plugin import FamilyPlugin


@dataclass(frozen=True)
class ModelRef:
    """What a user names: a path, a name for the hub (repo id, package id) or nothing (the demo
    model of ``family``); the family (detected when None); a name's revision, cache and progress bar.
    ``default_demo``: with neither a model nor a family, the installed family that has a demo model
    (``audiocpp serve``, the codec tool) instead of an error."""

    model: str | Path | None = None
    family: str | None = None
    revision: str | None = None
    cache_dir: str | Path | None = None
    progress: bool | None = None
    default_demo: bool = False


@dataclass
class LoadPlan:
    """A model ready to load: its family, local path and load options (checked, not yet typed)."""

    plugin: FamilyPlugin
    path: Path
    load_options: dict[str, Any] = field(default_factory=dict)
    demo: bool = False  # the family's demo model: random weights
    chosen: bool = False  # the user named the family (its errors then say whose files these are)

    @property
    def family(self) -> str:
        return self.plugin.name

    @property
    def spec(self):  # noqa: ANN201 - the family's ModelSpec
        return self.plugin.spec

    @property
    def note(self) -> str | None:
        """What to tell the user about the demo model, or None."""
        if not self.demo:
            return None
        return f"no --model given; using the {self.family} {self.plugin.demo_description}"


def plan_load(ref: ModelRef, load_options: dict[str, Any] | None = None, *,
              need: Callable[[FamilyPlugin], str | None] | None = None) -> LoadPlan:
    """Everything before the family reads the files (see the module docstring). ``need``: a check
    of the chosen family (returns why it will not do, or None), asked before any download."""
    from .hub import resolve_model
    from .registry import resolve_family

    if ref.model is None and ref.family is None and not ref.default_demo and speaking_family(need) is None:
        raise UsageError("no model given",
                         hint="pass --model PATH (or a name: org/name), or --family NAME to use its demo "
                         "model")
    options = dict(load_options or {})
    path = resolve_model(ref.model, family=ref.family, revision=ref.revision, cache_dir=ref.cache_dir,
                         progress=ref.progress, runnable_only=True)
    if path is not None and not path.exists():
        raise UsageError(f"--model {str(path)!r} does not exist",
                         hint="check the path, or give a Hugging Face repo id (org/name) or a package id")
    plugin = demo_family(need) if path is None and ref.family is None else resolve_family(path, ref.family)
    plugin.ensure_runnable()
    if need is not None:
        why = need(plugin)
        if why:
            raise UsageError(why)
    check_load_options(plugin, options)
    demo = path is None
    if demo:
        path = plugin.demo_model_path()
        if path is None:
            raise UsageError(f"family {plugin.name!r} has no demo model", hint="pass --model PATH")
    return LoadPlan(plugin, Path(path), options, demo=demo, chosen=ref.family is not None and not demo)


def check_load_options(plugin: FamilyPlugin, options: dict[str, Any]) -> None:
    """The load options the family takes, typed and in range; a device the machine has."""
    from .spec.options import resolve_options

    typed = resolve_options(plugin.spec, "load", options, fill_defaults=False)
    if typed.get("device") is not None:
        from .device import resolve_device

        resolve_device(typed["device"])


def load_planned(plan: LoadPlan) -> LoadedModel:
    """The family loads the planned files."""
    from .memory import return_freed_memory

    try:
        model = plan.plugin.load(plan.path, plan.load_options)
    except ModelError as error:
        other = _detected_elsewhere(plan.path, plan.plugin) if plan.chosen else None
        if other is None:
            raise
        raise ModelError(error.message, hint=f"{str(plan.path)!r} looks like a {other} model: drop --family "
                         f"(the family is detected) or pass --family {other}") from None
    return_freed_memory()
    from .registry import families_with_task

    model.families_with_task = families_with_task  # its refusals of a task name the families that do it
    return model


def load_model(ref: ModelRef, load_options: dict[str, Any] | None = None) -> LoadedModel:
    """:func:`plan_load` then :func:`load_planned`."""
    return load_planned(plan_load(ref, load_options))


def load(path: str | Path | None = None, *, family: str | None = None,
         load_options: dict[str, Any] | None = None, revision: str | None = None,
         cache_dir: str | Path | None = None) -> LoadedModel:
    """Load a model: ``audiocpp.engine.load("model.gguf")``. The family is detected unless given;
    ``load(family="omnivoice")`` loads the family's demo model (random weights, not speech); a name
    (``"openbmb/VoxCPM2"``, a package id) is downloaded once into the Hugging Face cache. Errors name
    ``load()``'s arguments, not the CLI's flags."""
    from .errors import python_wording

    try:
        if path is None and family is None:
            raise UsageError("load() needs a model path or a family",
                             hint="load('model.gguf'), or load(family='omnivoice') for its demo model")
        return load_model(ModelRef(path, family, revision, cache_dir), load_options)
    except AudiocppError as error:
        raise python_wording(error) from None


def speaking_family(need: Callable[[FamilyPlugin], str | None] | None = None) -> FamilyPlugin | None:
    """The installed family whose demo model is a real model that speaks and is installed here (Kokoro),
    with ``need`` met: the default model when none is named."""
    from .registry import families

    for _, plugin in sorted(families().items()):
        if (plugin.demo_speaks and plugin.spec.runnable and plugin.demo_unavailable() is None
                and (need is None or not need(plugin))):
            return plugin
    return None


def demo_family(need: Callable[[FamilyPlugin], str | None] | None = None) -> FamilyPlugin:
    """The family whose model is used when none is named: one whose demo model speaks (Kokoro's real
    weights) where it is installed, else the first runnable family with a demo model (and ``need`` met)."""
    from .plugin import FamilyPlugin
    from .registry import families

    speaking = speaking_family(need)
    if speaking is not None:
        return speaking
    found = [p for _, p in sorted(families().items())
             if p.spec.runnable and type(p).demo_model_path is not FamilyPlugin.demo_model_path
             and p.demo_unavailable() is None and (need is None or not need(p))]
    if not found:
        raise UsageError("no model given, and no installed family has a demo model",
                         hint="pass --model PATH")
    return found[0]


def _detected_elsewhere(path: Path, plugin: FamilyPlugin) -> str | None:
    """The one other family whose files ``path`` holds, when ``plugin`` does not recognise them."""
    from .detect import PathFacts
    from .registry import families

    try:
        facts = PathFacts.read(path)
    except AudiocppError:
        return None
    if plugin.detect(facts) is not None:
        return None
    others = [name for name, other in families().items()
              if other is not plugin and other.detect(facts) is not None]
    return others[0] if len(others) == 1 else None
