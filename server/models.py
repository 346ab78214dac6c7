"""The models a server serves: loaded once at start through the public API, each addressed by
a name (given as ``name=PATH``, else derived from the file or folder name)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import UsageError
from audiocpp.engine.model import LoadedModel
from audiocpp.engine.spec.model import OptionSpec

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: Option types that name files on the server: not accepted from HTTP clients.
PATH_TYPES = ("path", "audio_path", "path_list", "audio_path_list")


@dataclass
class ModelArg:
    """One ``--model`` value: ``PATH`` or ``name=PATH`` (``None`` path: the family's demo model)."""

    path: Path | None
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> ModelArg:
        name, sep, rest = text.partition("=")
        if sep and NAME_RE.match(name) and not Path(text).expanduser().exists():
            if not rest:
                raise UsageError(f"--model {text!r} names no path", hint="write --model NAME=PATH")
            return cls(Path(rest).expanduser(), name)
        return cls(Path(text).expanduser())


@dataclass
class ServedModel:
    name: str
    model: LoadedModel
    session_options: dict[str, Any] = field(default_factory=dict)
    demo: bool = False

    @property
    def family(self) -> str:
        return self.model.family

    @property
    def key(self) -> str:
        """A stable id of the weights and load options (names voice-prompt files across restarts)."""
        path = str(Path(self.model.path).resolve()) if self.model.path is not None else ""
        blob = json.dumps([self.family, path, {k: str(v) for k, v in sorted(self.model.load_options.items())}])
        return f"{self.family}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"

    def request_options(self) -> list[OptionSpec]:
        """The spec's request options a client may set over HTTP (file paths excluded)."""
        return [row for row in self.model.spec.options.request if row.type not in PATH_TYPES]

    def describe(self) -> dict[str, Any]:
        """The entry of ``GET /v1/models``: OpenAI's fields plus what a client needs to build requests."""
        spec = self.model.spec
        return {
            "id": self.name,
            "object": "model",
            "created": 0,
            "owned_by": "audiocpp",
            "family": self.family,
            "display_name": spec.display_name,
            "demo": self.demo,
            "tasks": list(spec.tasks),
            "modes": list(spec.modes),
            "sample_rate": self.model.sample_rate,
            "languages": len(spec.languages),
            "voice_prompts": "clone" in spec.tasks,
            "request_options": [
                {k: v for k, v in {
                    "name": row.name, "type": row.type, "description": row.description,
                    "default": row.default, "min": row.min, "max": row.max,
                    "values": list(row.allowed_values) if row.allowed_values else None,
                }.items() if v is not None}
                for row in self.request_options()
            ],
        }


def _derived_name(path: Path) -> str:
    stem = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "model"
    return name[:64]


def route_options(options: dict[str, str], family: str, families: set[str]) -> dict[str, str]:
    """The ``--session-option`` / ``--load-option`` values for one model: ``family.key=v`` goes to
    that family's models, a plain ``key=v`` to every model."""
    routed: dict[str, str] = {}
    for key, value in options.items():
        prefix, dot, _ = key.partition(".")
        if dot and prefix in families:
            if prefix == family:
                routed[key] = value
            continue
        if dot:
            raise UsageError(f"option {key!r} names family {prefix!r}, which no served model belongs to",
                             hint=f"served families: {', '.join(sorted(families))}")
        routed[key] = value
    return routed


def default_family() -> str:
    """The family whose demo model ``audiocpp serve`` uses without ``--model``: the first
    installed family that has one (OmniVoice in this repository), as the main command's demo."""
    from audiocpp.engine.plugin import FamilyPlugin
    from audiocpp.engine.registry import families

    for name, plugin in sorted(families().items()):
        if type(plugin).demo_model_path is not FamilyPlugin.demo_model_path and plugin.spec.runnable:
            return name
    raise UsageError("no installed family has a demo model", hint="pass --model PATH")


def load_models(args: list[ModelArg], family: str | None, session_options: dict[str, str],
                load_options: dict[str, str]) -> dict[str, ServedModel]:
    """Load every ``--model`` (or the demo model), validating options before the slow loads."""
    from audiocpp.engine.registry import resolve_family
    from audiocpp.engine.spec.options import resolve_options

    if not args:
        args = [ModelArg(None)]
    plugins = []
    for arg in args:
        if arg.path is not None and not arg.path.exists():
            raise UsageError(f"--model {str(arg.path)!r} does not exist", hint="check the path")
        plugin = resolve_family(arg.path, family or (default_family() if arg.path is None else None))
        plugin.ensure_runnable()
        plugins.append(plugin)
    names: dict[str, ServedModel] = {}
    families = {p.name for p in plugins}
    planned = []
    for arg, plugin in zip(args, plugins):
        sess = route_options(session_options, plugin.name, families)
        load = route_options(load_options, plugin.name, families)
        resolve_options(plugin.spec, "session", sess, fill_defaults=False)
        resolve_options(plugin.spec, "load", load, fill_defaults=False)
        name = arg.name or (f"{plugin.name}-demo" if arg.path is None else _derived_name(arg.path))
        if name in names or any(name == p[0] for p in planned):
            raise UsageError(f"two models are named {name!r}", hint="name them: --model NAME=PATH")
        planned.append((name, arg, plugin, sess, load))
    for name, arg, plugin, sess, load in planned:
        path = arg.path if arg.path is not None else plugin.demo_model_path()
        if arg.path is None:
            print(f"note: no --model given; serving the {plugin.name} demo model as {name!r} "
                  "(random weights: the audio is not speech)", file=sys.stderr)
        model = plugin.load(path, load)
        names[name] = ServedModel(name, model, sess, demo=arg.path is None)
    return names
