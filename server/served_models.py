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
from audiocpp.engine.loaded_model import LoadedModel
from audiocpp.engine.spec.model_spec import OptionSpec

from .openai_voices import openai_voice_map

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: The languages most users speak, in order: listed first where a model speaks them (Wyoming's voices,
#: errors), the rest in the spec's order. "auto" (let the model infer it) is no language of its own.
COMMON_LANGUAGES = ("en", "zh", "es", "fr", "de", "ja", "ko", "pt", "it", "ru", "nl", "ar", "hi", "tr",
                    "pl", "sv", "da", "fi", "no", "cs", "el", "he", "id", "ms", "th", "vi", "uk", "yue")
_NOT_LANGUAGES = ("auto", "none")
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
    _checker: Any = field(default=None, repr=False)  # a session that only checks requests
    _named: list[dict[str, Any]] | None = field(default=None, repr=False)
    _openai: dict[str, str] | None = field(default=None, repr=False)

    def languages(self) -> list[str]:
        """The model's languages, the most common first, without "auto"."""
        spoken = [lang for lang in self.model.spec.languages if lang.lower() not in _NOT_LANGUAGES]
        first = [lang for lang in COMMON_LANGUAGES if lang in spoken]
        return first + [lang for lang in spoken if lang not in first]

    def clones_with(self, transcript: str) -> bool:
        """Whether a stored voice with this transcript (empty: none) clones on this model: the family
        clones, and has reference-only cloning or gets the transcript it needs."""
        from audiocpp.engine.request_rules import needs_transcript

        spec = self.model.spec
        return "clone" in spec.tasks and (bool(transcript.strip()) or not needs_transcript(spec))

    def make_checker(self) -> None:
        """The session :meth:`check_language` and :meth:`check_voice` prepare requests with, made at
        start-up (with the named voices read once): making one takes the model's guard, which a running
        batch holds (the event loop must not wait for it)."""
        from audiocpp.engine.tasks import Mode, Task

        spec = self.model.spec
        if self._checker is None and (spec.option("request", "language") is not None
                                      or spec.option("request", "voice") is not None):
            self._checker = self.model.create_session(Task.TTS, Mode.OFFLINE, self.session_options)
        self.named_voices()

    def check_language(self, language: str) -> None:
        """The family's own check of a language (a name or an id), as a request's preparation makes it,
        without queueing anything (raises the engine's UsageError)."""
        from audiocpp.engine.records import TaskRequest

        self.make_checker()
        self._checker.prepare(TaskRequest(text="-", language=language))

    def check_voice(self, voice: str) -> None:
        """The family's own check of a named voice or mix (its syntax, weights, names), as a request's
        preparation makes it, without queueing anything: a 400 on ``voice`` when it refuses."""
        from audiocpp.engine.errors import AudiocppError
        from audiocpp.engine.records import TaskRequest

        from .errors import from_engine_error

        self.make_checker()
        if self._checker is None:
            return
        try:
            self._checker.prepare(TaskRequest(text="-", options={"voice": voice}))
        except AudiocppError as error:
            raise from_engine_error(error, param="voice") from None

    def named_voices(self) -> list[dict[str, Any]]:
        """The model's built-in voices (``LoadedModel.named_voices``: name, language, language_name,
        gender), read once; empty for families that clone instead."""
        if self._named is None:
            self._named = list(self.model.named_voices())
        return self._named

    def default_voices(self) -> dict[str, str]:
        """The voice ``default`` means for each of the model's languages (``LoadedModel.default_voice``;
        empty for a model without named voices)."""
        if not self.named_voices():
            return {}
        found = {lang: self.model.default_voice(lang) for lang in self.languages()}
        return {lang: voice for lang, voice in found.items() if voice}

    def openai_voices(self) -> dict[str, str]:
        """OpenAI's voice names -> this model's named voices (``openai_voices.openai_voice_map``)."""

        if self._openai is None:
            self._openai = openai_voice_map(self.named_voices())
        return self._openai

    @property
    def times_words(self) -> bool:
        """Whether the family gives word timings (its spec's ``word_timestamps`` capability)."""
        return "word_timestamps" in (self.model.spec.capabilities.get("tts") or [])

    @property
    def speaks_phonemes(self) -> bool:
        """Whether the family takes phonemes for text (its spec's request option ``phonemes``)."""
        return self.model.spec.option("request", "phonemes") is not None

    def phonemize(self, text: str, language: str | None) -> dict[str, Any]:
        """The family's text front end alone (``LoadedModel.phonemize``; raises the engine's UsageError)."""
        return self.model.phonemize(text, language)

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
            "languages": self.languages(),  # the most common first; "auto" (inferred) left out
            "voice_prompts": "clone" in spec.tasks,
            "voices": [v["name"] for v in self.named_voices()],  # named voices (Kokoro), GET /v1/audio/voices
            "default_voices": self.default_voices(),  # what "default" means, by the text's language
            "openai_voices": self.openai_voices(),  # what OpenAI's voice names mean on this model
            "word_timestamps": self.times_words,
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


def plan_models(args: list[ModelArg], family: str | None, session_options: dict[str, str],
                load_options: dict[str, str]) -> list[tuple[str, Any, dict[str, str]]]:
    """Every ``--model`` (or the demo model) planned: names downloaded, families chosen, options
    checked, nothing loaded; (name, plan, session options) each."""
    from audiocpp.engine.loader import ModelRef, check_load_options, plan_load
    from audiocpp.engine.spec.options import resolve_options

    if not args:
        args = [ModelArg(None)]
    for arg in args:
        _check_local(arg.model)
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
        name = arg.name or default_name(plan, arg.model)
        if name in names:
            raise UsageError(f"two models are named {name!r}", hint="name them: --model NAME=PATH")
        names.add(name)
        planned.append((name, plan, sess))
    return planned


def default_name(plan: Any, model: str | None) -> str:
    """A model's name when ``--model`` gives none: the file or folder name; for the default model (no
    ``--model``: one that speaks, Kokoro) the family's name (``kokoro``), for a demo of random weights
    ``<family>-demo``."""
    if plan.demo:
        return plan.family if getattr(plan.plugin, "demo_speaks", False) else f"{plan.family}-demo"
    return _derived_name(model or "", plan.path)


def _check_local(model: str | None) -> None:
    """A ``--model`` that is meant as a file or folder here (a path, a ``.gguf`` name) exists."""
    if model is None or Path(model).expanduser().exists():
        return
    if (model.lower().endswith(".gguf") and "/" not in model) or model.startswith(("/", "./", "../", "~")):
        raise UsageError(f"--model {model!r} does not exist",
                         hint="give an existing file or folder, a Hugging Face repo id (org/name) or a "
                         "package id (`audiocpp download --list`)")


def load_models(planned: list[tuple[str, Any, dict[str, str]]]) -> dict[str, ServedModel]:
    """Load the planned models (the slow part)."""
    from audiocpp.engine.loader import load_planned

    served: dict[str, ServedModel] = {}
    for name, plan, sess in planned:
        if plan.note:
            print(f"note: {plan.note.replace('using', 'serving', 1)} as {name!r}", file=sys.stderr)
        served[name] = ServedModel(name, load_planned(plan), sess, demo=plan.demo)
        served[name].make_checker()
    return served
