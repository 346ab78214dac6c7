"""Family discovery through the ``audiocpp.families`` entry-point group.

Built-in families register there exactly like third-party ones. Discovery imports only
the plugin modules (which must not import model code); detection reads file headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from .detect import PathFacts
from .errors import AudiocppError, ModelError, UsageError, did_you_mean
from .plugin import FamilyPlugin
from .tasks import Task

GROUP = "audiocpp.families"


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that could not be loaded; listed with its error instead of crashing."""

    name: str
    target: str
    error: str


_ORIGINS: dict[str, str] = {}
_DISTRIBUTIONS: dict[str, str] = {}

#: Package metadata key: the distribution (pip name) of the plugin that packaged a third-party family.
DISTRIBUTION_KEY = "audiocpp.family_distribution"


@cache
def _discover() -> tuple[dict[str, FamilyPlugin], tuple[BrokenPlugin, ...]]:
    plugins: dict[str, FamilyPlugin] = {}
    _ORIGINS.clear()
    _DISTRIBUTIONS.clear()
    broken: list[BrokenPlugin] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
            plugin = (obj() if isinstance(obj, type) or (callable(obj) and not isinstance(obj, FamilyPlugin))
                      else obj)
            if not isinstance(plugin, FamilyPlugin):
                raise TypeError(f"{ep.value} is not a FamilyPlugin (got {type(plugin).__name__})")
            if plugin.name != ep.name:
                raise ValueError(f"entry point {ep.name!r} names a plugin called {plugin.name!r}")
            if plugin.spec.family != ep.name:  # validates the spec now, so broken specs are reported here
                raise ValueError(f"plugin {ep.name!r} has the spec of family {plugin.spec.family!r} "
                                 f"({plugin.spec_path})")
        except Exception as exc:  # a broken third-party plugin must not break the CLI
            broken.append(BrokenPlugin(ep.name, ep.value, f"{type(exc).__name__}: {exc}"))
            continue
        if ep.name in plugins:
            broken.append(BrokenPlugin(ep.name, ep.value, "duplicate family name; the first one wins"))
            continue
        plugins[ep.name] = plugin
        dist = getattr(ep, "dist", None)
        _ORIGINS[ep.name] = f"{dist.name} {dist.version}" if dist is not None else ep.value
        if dist is not None:
            _DISTRIBUTIONS[ep.name] = dist.name
    return plugins, tuple(broken)


def origin(name: str) -> str:
    """The distribution that registered a family ("audiocpp 0.1.0" for built-ins)."""
    _discover()
    return _ORIGINS.get(name, "?")


def distribution(name: str) -> str | None:
    """The name of the distribution (what ``pip install`` takes) that registered family ``name``."""
    _discover()
    return _DISTRIBUTIONS.get(name)


def families() -> dict[str, FamilyPlugin]:
    return dict(_discover()[0])


def broken_families() -> tuple[BrokenPlugin, ...]:
    return _discover()[1]


def _short_error(text: str) -> str:
    """The first line of a plugin's error, and its first problem when that line announces a list."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("hint:")]
    if not lines:
        return text
    return " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]


def _broken(name: str) -> BrokenPlugin | None:
    return next((b for b in broken_families() if b.name == name), None)


def _broken_error(name: str, broken: BrokenPlugin, what: str = "") -> UsageError:
    return UsageError(f"{what}family {name!r} is installed but its plugin failed to load: {broken.error}",
                      hint=f"fix or reinstall the plugin ({broken.target}); `audiocpp families` lists it "
                      "as broken")


def get_family(name: str) -> FamilyPlugin:
    plugins = families()
    plugin = plugins.get(name)
    if plugin is None:
        broken = _broken(name)
        if broken is not None:
            raise _broken_error(name, broken)
        raise UsageError(
            f"unknown family {name!r}",
            hint=f"{did_you_mean(name, sorted(plugins))}installed families: "
            f"{', '.join(sorted(plugins)) or 'none'} (see `audiocpp families`)",
        )
    return plugin


def detect_family(path: str | Path) -> FamilyPlugin:
    """The one family whose files ``path`` holds, or a ModelError listing the candidates."""
    facts = PathFacts.read(path)
    embedded = facts.embedded_family
    if embedded is not None and embedded not in families():
        raise _not_installed(path, embedded, facts)
    evidence = []
    for plugin in families().values():
        found = plugin.detect(facts)
        if found is not None:
            evidence.append((found, plugin))
    if not evidence:
        broken = broken_families()
        note = ""
        if broken:
            listing = "; ".join(f"{b.name} ({_short_error(b.error)})" for b in broken)
            note = (
                "; "
                f"{'a family plugin that could read it is' if len(broken) == 1 else 'family plugins are'} "
                f"installed but failed to load: {listing}"
            )
        raise ModelError(
            f"cannot tell which family {str(path)!r} belongs to{note}",
            hint=f"pass --family (one of: {', '.join(sorted(families()))}); "
            "detection reads GGUF general.architecture / an embedded model spec, config.json model_type "
            "or architecture, and the folder layout" + ("; `audiocpp families` lists the broken plugins"
                                                        if broken else ""),
        )
    evidence.sort(key=lambda item: -item[0].strength)
    best = evidence[0][0].strength
    top = [(ev, pl) for ev, pl in evidence if ev.strength == best]
    if len(top) > 1:
        listing = "; ".join(f"{pl.name} ({ev.reason})" for ev, pl in top)
        raise ModelError(
            f"{str(path)!r} matches several families: {listing}",
            hint="pass --family to choose one",
        )
    return top[0][1]


def _not_installed(path: str | Path, family: str, facts: PathFacts) -> AudiocppError:
    """The error for a package whose family has no working plugin here."""
    broken = _broken(family)
    if broken is not None:
        return _broken_error(family, broken, what=f"{str(path)!r} is a package of family {family!r}; that ")
    dist = (facts.gguf_metadata or {}).get(DISTRIBUTION_KEY)
    how = (f"pip install {dist}" if isinstance(dist, str) and dist.strip()
           else f"pip install the package that provides the audiocpp family {family!r}")
    return ModelError(f"{str(path)!r} is a package of family {family!r}, which is not installed ({how})",
                      hint=f"installed families: {', '.join(sorted(families())) or 'none'} "
                      f"(see `audiocpp families`); `audiocpp inspect {path}` shows what the package holds")


def _check_family_of_package(path: str | Path, plugin: FamilyPlugin) -> None:
    """``--family X`` with a package of another family: say whose package it is."""
    try:
        facts = PathFacts.read(path)
    except AudiocppError:  # unreadable or missing: the loader reports it with its own words
        return
    embedded = facts.embedded_family
    if embedded is None or embedded == plugin.name:
        return
    if embedded not in families():
        raise _not_installed(path, embedded, facts)
    raise UsageError(f"{str(path)!r} is a package of family {embedded!r}, not {plugin.name!r}",
                     hint=f"drop --family (the package names its family) or pass --family {embedded}")


def resolve_family(path: str | Path | None, family: str | None) -> FamilyPlugin:
    if family:
        plugin = get_family(family)
        if path is not None:
            _check_family_of_package(path, plugin)
        return plugin
    if path is None:
        raise UsageError("no model given", hint="pass --model PATH, or --family NAME to use its demo model")
    return detect_family(path)


def families_with_task(task: Task) -> list[str]:
    """Installed, runnable families whose spec offers ``task`` (a hint's list: never raises)."""
    try:
        found = families()
    except Exception:  # noqa: BLE001 - a hint must never fail the error it decorates
        return []
    return sorted(name for name, plugin in found.items()
                  if plugin.spec.runnable and task.value in plugin.spec.tasks)
