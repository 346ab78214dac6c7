"""The JSONL manifest: one utterance a line, every line checked before anything runs.

A line is a JSON object with ``id`` and ``text`` and optionally ``task``, ``voice_ref``,
``reference_text``, ``voice_prompt`` (a saved voice prompt), ``voice`` (a named voice of the model, or a
mix: ``'jf_alpha(2)+jm_kumo(1)'``), ``speed``, ``phonemes``, ``instruct``, ``language``, ``seed``,
``options`` (any request option of the family's spec) and ``out`` (the output file name). ``voice``,
``speed`` and ``phonemes`` are request options of the families that have them (Kokoro), given as fields
as ``audiocpp`` gives them as flags.
Fields a line leaves out (or sets to null) take the command line's defaults. Relative paths
in a line are relative to the manifest's folder; relative paths given on the command line are
relative to the working directory, as for ``audiocpp``. Every problem is collected with its
line number (a line that is not UTF-8 too) and reported at once as one UsageError, in the words of
the line's fields (the engine's messages name the command line's flags: :func:`line_wording`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine import fs
from audiocpp.engine.errors import AudiocppError, UsageError
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.spec.options import resolve_options
from audiocpp.engine.tasks import Task, parse_task

FIELDS = ("id", "text", "task", "voice_ref", "reference_text", "voice_prompt", "voice", "speed", "phonemes",
          "instruct", "language", "seed", "options", "out")
_STRINGS = ("text", "task", "voice_ref", "reference_text", "voice_prompt", "voice", "instruct", "language",
            "out")
#: fields that are request options of the families that take them (``audiocpp``'s --voice, --speed,
#: --phonemes); a family without the option refuses the field
OPTION_FIELDS = ("voice", "speed", "phonemes")
WORDS_SUFFIX = ".words.json"
# File extension of each output format, and the format an extension implies.
FORMAT_EXT = {"wav16": ".wav", "wav24": ".wav", "wav32": ".wav", "flac": ".flac", "ogg": ".ogg"}
EXT_FORMAT = {".wav": "wav16", ".flac": "flac", ".ogg": "ogg"}
MANIFEST_OUT = "manifest.jsonl"
_ID = re.compile(r"\w[\w.\-]*")
_MAX_LISTED = 20
# The engine words its errors for the command line; a manifest line sets fields. Applied in order.
_LINE_WORDING: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"pass --text, --text-file or text on stdin", "give the line's text"),
    (r"(?:--request-option|-r) (\w+)=N", r'"options": {"\1": N}'),
    (r"(?:--request-option|-r) (\w+)=", r'"options": {"\1": ...}: '),
    (r"--reference-text", "reference_text"),
    (r"--voice-ref(?: FILE| R)?", "voice_ref"),
    (r"--voice-prompt(?: FILE)?", "voice_prompt"),
    (r"--voice\b(?!-)", "voice"),
    (r"--instruct", "instruct"),
    (r"--language", "language"),
    (r"--seed", "seed"),
    (r"--task (\w+)", r'"task": "\1"'),
))


def line_wording(text: str) -> str:
    """An engine message in the terms of a manifest line: its fields, not ``audiocpp``'s flags."""
    for pattern, replacement in _LINE_WORDING:
        text = pattern.sub(replacement, text)
    return text


@dataclass
class Defaults:
    """What the command line gives every item that does not say otherwise."""

    task: str = "tts"
    voice_ref: Path | None = None
    reference_text: str | None = None
    voice_prompt: Path | None = None
    voice: str | None = None  # a named voice or mix (request option 'voice')
    speed: float | None = None  # request option 'speed'
    instruct: str | None = None
    language: str | None = None
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    fmt: str | None = None


@dataclass
class Item:
    """One validated utterance, with defaults applied and paths made absolute (JSON-safe)."""

    id: str
    line: int
    index: int
    text: str
    task: str
    out: str
    fmt: str
    voice_ref: str | None = None
    reference_text: str | None = None
    voice_prompt: str | None = None
    instruct: str | None = None
    language: str | None = None
    seed: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Item:
        return cls(**json.loads(text))

    @property
    def voice_key(self) -> tuple[str, str, str, str]:
        """Items with the same key share a prepared voice (a reference, a prompt or a named voice)."""
        return (self.voice_prompt or "", self.voice_ref or "", self.reference_text or "",
                str(self.options.get("voice") or ""))

    @property
    def words_out(self) -> str:
        """The file of the item's word timings, beside its audio (families that time words)."""
        return Path(self.out).stem + WORDS_SUFFIX

    def sort_key(self) -> tuple[Any, ...]:
        return (self.task, self.voice_key, len(self.text), self.index)


def _absolute(value: str | Path, base: Path) -> str:
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # "~name" of a user this system does not know
        raise ValueError(f"{str(value)!r} starts with '~' but there is no such user's home folder") from None
    return str(path if path.is_absolute() else (base / path).resolve())


def _path_options(spec: ModelSpec) -> dict[str, bool]:
    """Request options holding paths: name -> whether it is a list."""
    return {row.name: row.type.endswith("_list") for row in spec.options.request
            if row.type in ("path", "audio_path", "path_list", "audio_path_list")}


def _absolute_options(options: Mapping[str, Any], spec: ModelSpec, base: Path) -> dict[str, Any]:
    paths = _path_options(spec)
    fixed: dict[str, Any] = {}
    for name, value in options.items():
        if name in paths and value is not None:
            if paths[name]:
                parts = value.split(",") if isinstance(value, str) else list(value)
                value = [_absolute(p.strip() if isinstance(p, str) else p, base) for p in parts
                         if str(p).strip()]
            elif isinstance(value, (str, Path)):
                value = _absolute(value, base)
        fixed[name] = value
    return fixed


def times_words(spec: ModelSpec) -> bool:
    """Whether the family times its words (its spec's ``word_timestamps`` capability)."""
    return "word_timestamps" in (spec.capabilities.get("tts") or [])


def _option_field(name: str, value: Any, spec: ModelSpec) -> Any:
    """A line's ``voice``, ``speed`` or ``phonemes``: of its JSON type, and an option of the family."""
    if name == "speed" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"speed must be a number, got {json.dumps(value)}")
    if name == "phonemes" and not isinstance(value, bool):
        raise ValueError(f"phonemes must be true or false (true: the line's text is phonemes), got "
                         f"{json.dumps(value)}")
    if spec.option("request", name) is None:
        if name == "voice":
            raise ValueError(f"voice names one of the model's own voices, and {spec.family} has none "
                             "(a saved voice prompt file is the field voice_prompt)")
        raise ValueError(f"{spec.family} has no request option {name!r} (field {name})")
    return value


def output_format(out: str, fmt: str | None) -> str:
    """The format of a line's ``out``: its extension picks the container (the line's own choice
    wins over the --format default), and --format the sample type when it is that container."""
    ext = Path(out).suffix.lower()
    implied = EXT_FORMAT.get(ext)
    if implied is None:
        raise ValueError(f"out {out!r}: use a .wav, .flac or .ogg file name")
    return fmt if fmt is not None and FORMAT_EXT[fmt] == ext else implied


class _Checker:
    """Validates lines one by one; problems are collected, not raised."""

    def __init__(self, spec: ModelSpec, defaults: Defaults, base: Path) -> None:
        self.spec = spec
        self.defaults = defaults
        self.base = base
        self.ids: dict[str, int] = {}
        self.outs: dict[str, int] = {}
        self.words_outs: dict[str, int] = {}  # the word-timing files of families that time words
        self.times_words = times_words(spec)
        self.default_options = _absolute_options(defaults.options, spec, Path.cwd())

    def item(self, raw: Any, line: int, index: int) -> Item:
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(FIELDS))
        if unknown:
            raise ValueError(f"unknown field {', '.join(map(repr, unknown))} (fields: {', '.join(FIELDS)})")
        given = {k: v for k, v in raw.items() if v is not None}
        for name in _STRINGS:
            if name in given and not isinstance(given[name], str):
                raise ValueError(f"{name} must be a string, got {json.dumps(given[name])}")
        item_id = self._id(given)
        text = given.get("text")
        if text is None or not text.strip():
            raise ValueError("text is missing or empty")
        task = self._task(given.get("task", self.defaults.task))
        seed = given.get("seed", self.defaults.seed)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer, got {json.dumps(seed)}")
        # The voice defaults (--voice-ref, --reference-text, --voice-prompt) are for clones only.
        clone = task is Task.CLONE
        voice_ref = self._file(given, "voice_ref", self.defaults.voice_ref if clone else None)
        voice_prompt = self._file(given, "voice_prompt", self.defaults.voice_prompt if clone else None)
        options = self._options(given.get("options", {}), given)
        item = Item(
            id=item_id, line=line, index=index, text=text, task=task.value, out="", fmt="",
            voice_ref=voice_ref,
            reference_text=given.get("reference_text", self.defaults.reference_text if clone else None),
            voice_prompt=voice_prompt, instruct=given.get("instruct", self.defaults.instruct),
            language=given.get("language", self.defaults.language), seed=seed, options=options,
        )
        options = self._check_options(item)
        self._check_voice(item, task, options)
        item.out, item.fmt = self._out(given.get("out"), item_id, line)
        self.ids[item_id] = line
        return item

    def _id(self, given: dict[str, Any]) -> str:
        raw = given.get("id")
        if raw is None:
            raise ValueError("id is missing")
        if isinstance(raw, bool) or not isinstance(raw, (str, int)):
            raise ValueError(f"id must be a string or an integer, got {json.dumps(raw)}")
        item_id = str(raw)
        if not _ID.fullmatch(item_id) or len(item_id) > 200:
            raise ValueError(f"id {item_id!r} cannot name a file: use letters, digits, '_', '-' and '.' "
                             "(not first), at most 200 characters")
        if item_id in self.ids:
            raise ValueError(f"id {item_id!r} is already used on line {self.ids[item_id]}")
        return item_id

    def _task(self, value: str) -> Task:
        task = parse_task(value)
        if task.value not in self.spec.tasks:
            names = ", ".join(Task(t).cli_name for t in self.spec.tasks)
            raise ValueError(f"{self.spec.family} does not support task {task.cli_name!r} "
                             f"(it supports: {names})")
        return task

    def _file(self, given: dict[str, Any], name: str, default: Path | None) -> str | None:
        if name in given:
            path = Path(_absolute(given[name], self.base))
            shown = given[name]
        elif default is not None:
            path = Path(_absolute(default, Path.cwd()))
            shown = str(default)
        else:
            return None
        if not fs.is_file(path):  # never raises (a name too long is simply not there)
            raise ValueError(f"{name} {shown!r} does not exist"
                             + ("" if shown == str(path) else f" ({path})"))
        return str(path)

    def _options(self, raw: Any, given: dict[str, Any]) -> dict[str, Any]:
        """The item's request options: --request-option, then --voice / --speed, then the line's
        ``options``, then its ``voice`` / ``speed`` / ``phonemes`` fields (which must agree with the
        line's ``options`` where both give one)."""
        if not isinstance(raw, dict):
            raise ValueError(f"options must be a JSON object, got {json.dumps(raw)}")
        options = dict(self.default_options)
        for name in OPTION_FIELDS:
            flag = getattr(self.defaults, name, None)
            if flag is not None:
                options[name] = flag
        line = _absolute_options(raw, self.spec, self.base)
        options.update(line)
        for name in OPTION_FIELDS:
            if name not in given:
                continue
            value = _option_field(name, given[name], self.spec)
            if name in line and str(line[name]).lower() != str(value).lower():
                raise ValueError(f"{name} is given twice with different values ({line[name]!r} in options "
                                 f"and {value!r})")
            options[name] = value
        return options

    def _check_options(self, item: Item) -> dict[str, Any]:
        """The checks Session.prepare makes on options, before any model is loaded; the typed options."""
        merged = dict(item.options)
        first_class = {"reference_text": item.reference_text, "instruct": item.instruct,
                       "language": item.language, "seed": item.seed}
        for name, value in first_class.items():
            if value is None:
                continue
            if name in merged and str(merged[name]) != str(value):
                raise ValueError(f"{name} is given twice with different values "
                                 f"({merged[name]!r} and {value!r})")
            merged[name] = value
        try:
            return resolve_options(self.spec, "request", merged)
        except UsageError as error:
            raise ValueError(error.message + (f" ({error.hint})" if error.hint else "")) from None

    def _check_voice(self, item: Item, task: Task, options: dict[str, Any]) -> None:
        """The engine's rules on reference inputs (engine.request_rules, as `audiocpp` checks them
        before loading) and a reference within the cap."""
        from audiocpp.engine.audio.io import audio_duration
        from audiocpp.engine.request_rules import (
            REFERENCE_CAP_OPTION,
            ReferenceInputs,
            check_reference_length,
            check_request,
        )

        given = ReferenceInputs.of(self.spec, options, voice=item.voice_ref is not None,
                                   voice_prompt=item.voice_prompt is not None)
        check_request(self.spec, task, given)
        if item.voice_ref is not None:
            duration = audio_duration(Path(item.voice_ref))
            if duration is not None:
                check_reference_length(duration, options.get(REFERENCE_CAP_OPTION),
                                       transcript=given.reference_text, name=repr(item.voice_ref))

    def _out(self, out: str | None, item_id: str, line: int) -> tuple[str, str]:
        if out is None:
            fmt = self.defaults.fmt or "wav16"
            out = f"{item_id}{FORMAT_EXT[fmt]}"
        else:
            if Path(out).name != out or out.startswith(".") or "\\" in out:
                raise ValueError(f"out {out!r} must be a plain file name (no folders, not hidden)")
            fmt = output_format(out, self.defaults.fmt)
        if out == MANIFEST_OUT:
            raise ValueError(f"out {out!r} is the batch's own manifest file")
        if out in self.outs:
            raise ValueError(f"out {out!r} is already written by line {self.outs[out]}")
        if self.times_words:
            words = Path(out).stem + WORDS_SUFFIX
            if words in self.words_outs:
                raise ValueError(f"out {out!r}: its word timings {words!r} are already written by line "
                                 f"{self.words_outs[words]} (give the two outputs different names)")
            self.words_outs[words] = line
        self.outs[out] = line
        return out, fmt


def read_manifest(path: Path, spec: ModelSpec, defaults: Defaults) -> list[Item]:
    """Every item of the manifest at ``path``, or one UsageError listing each bad line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"manifest {str(path)!r} does not exist",
                         hint="pass a JSONL file, one utterance a line") from None
    except IsADirectoryError:
        raise UsageError(f"manifest {str(path)!r} is a folder", hint="pass a JSONL file") from None
    checker = _Checker(spec, defaults, path.resolve().parent)
    items: list[Item] = []
    problems: list[str] = []
    for number, raw_line in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), start=1):
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.append(f"line {number}: not UTF-8 text (byte 0x{raw_line[error.start]:02x} at byte "
                            f"{error.start + 1} of the line); save the manifest as UTF-8")
            continue
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"line {number}: not valid JSON: {error.msg} (column {error.colno})")
            continue
        except (ValueError, RecursionError) as error:  # a number of 5000 digits, nesting too deep
            problems.append(f"line {number}: not valid JSON: {str(error)[:120]}")
            continue
        try:
            items.append(checker.item(raw, number, len(items)))
        except (ValueError, AudiocppError) as error:
            message = error.message if isinstance(error, AudiocppError) else str(error)
            problems.append(f"line {number}: {line_wording(message)}")
    if problems:
        shown = problems[:_MAX_LISTED]
        if len(problems) > _MAX_LISTED:
            shown.append(f"... and {len(problems) - _MAX_LISTED} more")
        raise UsageError(
            f"manifest {str(path)!r} has {len(problems)} bad line{'s' if len(problems) > 1 else ''}; "
            "nothing was synthesized:\n  " + "\n  ".join(shown),
            hint="fix these lines (fields: " + ", ".join(FIELDS) + "); `audiocpp batch FILE --check` "
            "checks a manifest without running it",
        )
    if not items:
        raise UsageError(f"manifest {str(path)!r} has no items", hint="write one JSON object a line")
    return items
