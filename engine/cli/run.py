"""The synthesis command: build a TaskRequest from flags, run it, write audio atomically."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..records import TaskRequest, TaskResult, VoiceReference
from ..spec.options import parse_key_values
from ..tasks import Mode, parse_mode, parse_task

_EXT_FORMAT = {".wav": "wav16", ".flac": "flac", ".ogg": "ogg"}


@dataclass
class RunArgs:
    family: str | None = None
    task: str = "tts"
    model: str | Path | None = None  # a path, or a name resolved by engine.hub (repo id, package id)
    codec: Path | None = None
    text: str | None = None
    text_file: Path | None = None
    voice_ref: Path | None = None
    reference_text: str | None = None
    instruct: str | None = None
    language: str | None = None
    seed: int | None = None
    mode: str = "offline"
    out: Path | None = None
    out_dir: Path | None = None
    fmt: str | None = None
    voice_prompt: Path | None = None
    voice_prompt_out: Path | None = None
    request_options: list[str] = field(default_factory=list)
    session_options: list[str] = field(default_factory=list)
    load_options: list[str] = field(default_factory=list)
    metrics: bool = False
    progress: bool | None = None
    revision: str | None = None  # of a model name (engine.hub)
    cache_dir: Path | None = None  # Hugging Face cache for model names (engine.hub)


def read_text(args: RunArgs) -> str:
    sources = [s for s in (args.text is not None and args.text != "-", args.text_file is not None) if s]
    if len(sources) > 1:
        raise UsageError("give the text once: --text or --text-file, not both")
    if args.text_file is not None:
        try:
            return args.text_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"--text-file {str(args.text_file)!r} does not exist") from None
        except UnicodeDecodeError:
            raise UsageError(f"--text-file {str(args.text_file)!r} is not UTF-8 text") from None
    if args.text is not None and args.text != "-":
        return args.text
    if args.text == "-" or not sys.stdin.isatty():
        return sys.stdin.read()
    raise UsageError("no text given", hint="pass --text \"...\", --text-file FILE, or pipe text on stdin")


def output_format(out: Path, fmt: str | None) -> str:
    if fmt is not None:
        from ..audio.io import WRITE_FORMATS

        if fmt not in WRITE_FORMATS:
            raise UsageError(f"--format {fmt!r} is not supported", hint=f"use one of: {', '.join(WRITE_FORMATS)}")
        return fmt
    fmt = _EXT_FORMAT.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(
            f"cannot tell the audio format of {str(out)!r} from its extension",
            hint="use .wav, .flac or .ogg, or pass --format",
        )
    return fmt


def build_request(args: RunArgs, text: str, request_options: dict[str, Any]) -> TaskRequest:
    """The request the flags describe; ``audiocpp batch`` builds each item's request with it too."""
    return TaskRequest(
        text=text,
        voice=VoiceReference(path=args.voice_ref) if args.voice_ref is not None else None,
        reference_text=args.reference_text,
        instruct=args.instruct,
        language=args.language,
        seed=args.seed,
        voice_prompt=args.voice_prompt,
        options=request_options,
    )


def run_request(args: RunArgs) -> None:
    from ..progress import Progress
    from ..registry import resolve_family

    if args.out is None:
        raise UsageError("no output file", hint="pass --out FILE.wav")
    fmt = output_format(args.out, args.fmt)
    if not args.out.parent.exists():
        raise UsageError(f"the folder of --out {str(args.out)!r} does not exist")
    task = parse_task(args.task)
    mode = parse_mode(args.mode)
    text = read_text(args)
    request_options = parse_key_values(args.request_options, flag="--request-option")
    session_options = parse_key_values(args.session_options, flag="--session-option")
    load_options = parse_key_values(args.load_options, flag="--load-option")
    if args.codec is not None:
        load_options["codec"] = str(args.codec)
    if args.voice_ref is not None and not args.voice_ref.is_file():
        raise UsageError(f"--voice-ref {str(args.voice_ref)!r} does not exist")

    from ..hub import resolve_model

    # A model name (repo id, package id) becomes its cached or downloaded snapshot; paths stay paths.
    model_arg = resolve_model(args.model, family=args.family, revision=args.revision, cache_dir=args.cache_dir,
                              progress=args.progress, runnable_only=True)
    plugin = resolve_family(model_arg, args.family)
    plugin.ensure_runnable()
    # Validate what can be validated before the (slow) model load.
    from ..spec.options import resolve_options

    resolve_options(plugin.spec, "session", session_options, fill_defaults=False)
    model_path = model_arg if model_arg is not None else plugin.demo_model_path()
    if model_path is None:
        raise UsageError(f"family {plugin.name!r} has no demo model", hint="pass --model PATH")
    if args.model is None:
        print(f"note: no --model given; using the {plugin.name} demo model (random weights: the audio is not speech)",
              file=sys.stderr)
    model = plugin.load(model_path, load_options)
    session = model.create_session(task, mode, session_options)
    request = build_request(args, text, request_options)
    from ..audio.io import write_audio

    progress = Progress(enabled=args.progress)
    result: TaskResult | None = None
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
    for event in session.stream(request, progress=progress):
        if event.is_final:
            result = event.result
            continue
        if mode is Mode.STREAMING:
            print(f"event=audio index={event.index} samples={event.audio.num_samples}", file=sys.stderr)
        if args.out_dir is not None:
            write_audio(args.out_dir / f"chunk_{event.index}.wav", event.audio, "wav16")
    assert result is not None
    if args.out_dir is not None and mode is Mode.OFFLINE:
        for i, chunk in enumerate(result.chunks):
            write_audio(args.out_dir / f"chunk_{i}.wav", chunk, "wav16")
    write_audio(args.out, result.audio, fmt)
    if args.voice_prompt_out is not None:
        if result.voice_prompt is None:
            raise UsageError(
                "--voice-prompt-out needs a request that prepares a voice (a clone with --voice-ref)"
            )
        result.voice_prompt.save(args.voice_prompt_out)
        print(f"voice_prompt_out={args.voice_prompt_out}")
    print(f"audio_out={args.out}")
    print(f"sample_rate={result.audio.sample_rate}")
    print(f"duration_s={result.audio.duration:.3f}")
    if args.metrics:
        for key, value in result.metrics.as_dict().items():
            print(f"{key}={value}")
