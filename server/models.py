"""The models a server serves: loaded once at start through the engine's one load path
(``engine.loader``: a path or a name downloaded once, as the main command takes it), each addressed
by a name (given as ``name=MODEL``, else derived from the file, folder or repo name)."""

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
    """One ``--model`` value: ``MODEL`` or ``name=MODEL``, a path or a name (a Hugging Face repo id,
    a package id) as the main command takes it (``None``: the family's demo model)."""

    model: str | None
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> ModelArg:
        name, sep, rest = text.partition("=")
        if sep and NAME_RE.match(name) and not Path(text).expanduser().exists():
            if not rest:
                raise UsageError(f"--model {text!r} names no model",
                                 hint="write --model NAME=PATH (or NAME=org/repo)")
            return cls(_expand(rest), name)
        return cls(_expand(text))


def _expand(text: str) -> str:
    path = Path(text).expanduser()
    return str(path) if path.exists() or text.startswith("~") else text


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
        blob = json.dumps([self.family, path,
                           {k: str(v) for k, v in sorted(self.model.load_options.items())}])
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


def _derived_name(model: str, path: Path) -> str:
    """The file or folder name without ``.gguf``; a name on the hub: its last part (``org/VoxCPM2``:
    VoxCPM2)."""
    if model and not Path(model).expanduser().exists():
        path = Path(model.split("@", 1)[0].rstrip("/"))
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


def load_models(args: list[ModelArg], family: str | None, session_options: dict[str, str],
                load_options: dict[str, str]) -> dict[str, ServedModel]:
    """Load every ``--model`` (or the demo model): all planned (names downloaded, families chosen,
    options checked) before the first slow load."""
    from audiocpp.engine.loader import ModelRef, check_load_options, load_planned, plan_load
    from audiocpp.engine.spec.options import resolve_options

    if not args:
        args = [ModelArg(None)]
    plans = [plan_load(ModelRef(arg.model, family, default_demo=True)) for arg in args]
    families = {plan.family for plan in plans}
    planned = []
    names: set[str] = set()
    for arg, plan in zip(args, plans):
        sess = route_options(session_options, plan.family, families)
        load = route_options(load_options, plan.family, families)
        resolve_options(plan.spec, "session", sess, fill_defaults=False)
        check_load_options(plan.plugin, load)
        plan.load_options = load
        name = arg.name or (f"{plan.family}-demo" if plan.demo else _derived_name(arg.model or "", plan.path))
        if name in names:
            raise UsageError(f"two models are named {name!r}", hint="name them: --model NAME=PATH")
        names.add(name)
        planned.append((name, plan, sess))
    served: dict[str, ServedModel] = {}
    for name, plan, sess in planned:
        if plan.note:
            print(f"note: {plan.note.replace('using', 'serving', 1)} as {name!r}", file=sys.stderr)
        served[name] = ServedModel(name, load_planned(plan), sess, demo=plan.demo)
    return served
