"""The synthesis command: build a TaskRequest from flags, run it, write audio atomically.

Everything that can be checked without the model is checked before it is loaded (outputs,
inputs, options); inputs that would be ignored are errors. Warnings of the engine print as
``warning: ...`` on stderr; Ctrl-C says what was kept.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppWarning, UsageError
from audiocpp.engine.records import TaskRequest, TaskResult
from audiocpp.engine.spec.options import parse_key_values
from audiocpp.engine.tasks import Mode, Task, parse_mode, parse_task
from audiocpp.engine.text.srt import Cue

from .checks import (
    USAGE,
    check_input_file,
    check_out_dir,
    check_out_file,
    check_session_prefixes,
    check_supported,
    output_format,
)


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
    voice: str | None = None  # a named voice or mix (request option 'voice')
    phonemes: str | None = None  # the text as phonemes (request option 'phonemes')
    speed: float | None = None  # request option 'speed'
    captions: Path | None = None  # word-level .srt / .vtt of the output (cli.captions)
    timestamps: Path | None = None  # word timings as JSON (cli.captions)
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
    sample_rate: int | None = None  # resample what is written (cli.pipes)
    srt: Path | None = None  # dub these subtitles (cli.dubbing)
    stream_by_line: bool = False  # stdin text: one request per line (cli.pipes)
    device: str | None = None  # load option 'device' (engine.device)
    timeout: float | None = None  # seconds each request may take (Job.cancel_after): exit 124


def read_text(args: RunArgs) -> str:
    sources = [s for s in (args.text is not None and args.text != "-", args.text_file is not None,
                           args.phonemes is not None) if s]
    if len(sources) > 1:
        raise UsageError("give the text once: one of --text, --text-file and --phonemes, not both",
                         hint="drop all but one")
    if args.phonemes is not None:
        return args.phonemes
    if args.text_file is not None:
        try:
            return args.text_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"--text-file {str(args.text_file)!r} does not exist",
                             hint="check the path") from None
        except IsADirectoryError:
            raise UsageError(f"--text-file {str(args.text_file)!r} is a folder",
                             hint="pass a text file") from None
        except UnicodeDecodeError:
            raise UsageError(f"--text-file {str(args.text_file)!r} is not UTF-8 text",
                             hint="convert it, e.g. `iconv -t UTF-8 FILE`") from None
    if args.text is not None and args.text != "-":
        try:
            args.text.encode("utf-8")
        except UnicodeEncodeError:  # bytes the locale could not decode arrive as lone surrogates
            raise UsageError("--text is not UTF-8 text", hint="convert it, e.g. `iconv -t UTF-8`, or pass it "
                             "with --text-file") from None
        return args.text
    if args.text == "-" or not sys.stdin.isatty():
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("the text on stdin is not UTF-8",
                             hint="convert it, e.g. `iconv -t UTF-8`") from None
    raise UsageError("no text given", hint="pass --text \"...\", --text-file FILE, or pipe text on stdin")


def build_request(args: RunArgs, text: str, request_options: dict[str, Any]) -> TaskRequest:
    """The request the flags describe (``TaskRequest.from_inputs``, as ``audiocpp batch`` builds its
    items)."""
    flags = {"voice": args.voice, "speed": args.speed,
             "phonemes": True if args.phonemes is not None else None}
    for name, value in flags.items():
        if value is None:
            continue
        given = request_options.get(name)
        if given is not None and str(given).lower() != str(value).lower():
            raise UsageError(f"option {name!r} is given twice with different values ({given!r} and "
                             f"{value!r})",
                             hint=f"drop --request-option {name}=...")
        request_options = {**request_options, name: value}
    return TaskRequest.from_inputs(text, voice_ref=args.voice_ref, reference_text=args.reference_text,
                                   instruct=args.instruct, language=args.language, seed=args.seed,
                                   voice_prompt=args.voice_prompt, options=request_options)


@contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """The engine's warnings (e.g. a reference it cut) as one ``warning: ...`` line each."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        if issubclass(category, AudiocppWarning):
            print(f"warning: {message}", file=sys.stderr)
        else:
            previous(message, category, filename, lineno, file, line)

    previous = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always", AudiocppWarning)
        warnings.showwarning = show
        yield


def _check_outputs(args: RunArgs, task: Task, mode: Mode) -> str:
    """The output format; raises before any work if an output cannot be written."""
    from .pipes import check_sample_rate, is_stdout, stdout_format

    if args.out is None:
        raise UsageError("no output file", hint="pass --out FILE.wav (or --out - for stdout)")
    if is_stdout(args.out):
        fmt = stdout_format(args.fmt, mode is Mode.STREAMING)
    else:
        check_out_file(args.out, "--out")  # a folder is said to be one before its extension is read
        fmt = output_format(args.out, args.fmt)
    check_sample_rate(args.sample_rate, fmt)
    if args.out_dir is not None:
        check_out_dir(args.out_dir)
    if args.voice_prompt_out is not None:
        if task is not Task.CLONE or (args.voice_ref is None and args.voice_prompt is None):
            raise UsageError("--voice-prompt-out saves the voice of a clone",
                             hint="use it with --task clon --voice-ref FILE --reference-text '...'")
        check_out_file(args.voice_prompt_out, "--voice-prompt-out")
    return fmt


def _check_inputs(args: RunArgs, task: Task) -> None:
    from audiocpp.engine.request_rules import check_voice_inputs

    if args.voice_ref is not None:
        check_input_file(args.voice_ref, "--voice-ref")
    if args.voice_prompt is not None:
        check_input_file(args.voice_prompt, "--voice-prompt")
    check_voice_inputs(task, voice=args.voice_ref is not None, voice_prompt=args.voice_prompt is not None,
                       reference_text=bool((args.reference_text or "").strip()))
    if args.srt is not None and (args.text is not None or args.text_file is not None
                                 or args.phonemes is not None):
        raise UsageError("--srt gives the text (its cues), and --text / --text-file give it too",
                         hint="drop --text / --text-file, or --srt")


def _is_bare(args: RunArgs) -> bool:
    return args == RunArgs(progress=args.progress)


def run_request(args: RunArgs) -> None:
    if _is_bare(args):
        print(USAGE, file=sys.stderr)
        raise SystemExit(2)
    task = parse_task(args.task)
    mode = parse_mode(args.mode)
    fmt = _check_outputs(args, task, mode)
    _check_inputs(args, task)
    from .captions import check_word_outputs

    check_word_outputs(args.captions, args.timestamps)
    from audiocpp.engine.text.srt import read_srt

    from .pipes import stdin_is_incremental

    cues = read_srt(args.srt) if args.srt is not None else None
    given = args.phonemes if args.phonemes is not None else args.text
    incremental = cues is None and stdin_is_incremental(given, args.text_file, mode is Mode.STREAMING)
    if args.stream_by_line and not incremental:
        raise UsageError("--stream-by-line reads the text from stdin line by line",
                         hint="use it with --mode streaming and the text on stdin (--text - or a pipe)")
    kept: list[Path] = []
    created = _folders_to_create(args.out_dir)
    try:
        text = None if cues is not None or incremental else read_text(args)
        if text is not None and not text.strip():
            raise UsageError("the text to synthesize is empty",
                             hint="pass --text, --text-file or text on stdin")
        with _warnings_on_stderr():
            _synthesize(args, task, mode, fmt, text, kept, cues)
    except KeyboardInterrupt:  # Ctrl-C: the job was cancelled (cli/main.py); what was kept is said
        _report_interrupt(args, kept)
        raise SystemExit(130) from None
    except SystemExit as exc:
        if type(exc).__name__ != "Terminated":  # SIGTERM (cli/main.py's): as Ctrl-C, exit 143
            raise
        _report_interrupt(args, kept, "terminated")
        raise SystemExit(exc.code) from None
    except Exception:
        _discard_partial_output(args, kept, created)
        raise


def _kernel_build_seconds() -> float:
    """Seconds this process has spent building kernels; none before the kernels' module is imported (not
    importing it keeps torch out of the checks that run before a model loads: a bad flag fails at once)."""
    jit = sys.modules.get("audiocpp.engine.nn.kernels.jit")
    return jit.build_seconds() if jit is not None else 0.0


def _synthesize(args: RunArgs, task: Task, mode: Mode, fmt: str, text: str | None, kept: list[Path],
                cues: list[Cue] | None = None) -> None:
    """``text``: the whole text; None: the cues of ``--srt``, or sentences read from stdin as they come."""
    from audiocpp.engine.audio.io import audio_duration, write_audio
    from audiocpp.engine.execution.watch import watched
    from audiocpp.engine.loader import ModelRef, load_planned, plan_load
    from audiocpp.engine.progress import Progress
    from audiocpp.engine.request_rules import (
        REFERENCE_CAP_OPTION,
        ReferenceInputs,
        check_prompt_transcript,
        check_reference_length,
        check_request,
    )
    from audiocpp.engine.spec.options import resolve_options

    from .pipes import AudioOutput, merge_results, read_segments

    kernel_seconds = _kernel_build_seconds()
    # --out -: from here on fd 1 is stderr and the audio has the real stdout to itself.
    output = AudioOutput(args.out, fmt, streaming=mode is Mode.STREAMING, target_rate=args.sample_rate)
    info = output.info

    request_options = parse_key_values(args.request_options, flag="--request-option")
    session_options = parse_key_values(args.session_options, flag="--session-option")
    load_options = parse_key_values(args.load_options, flag="--load-option")
    if args.codec is not None:
        load_options["codec"] = str(args.codec)
    if args.device is not None:
        load_options["device"] = args.device
    request = build_request(args, text or "", request_options)

    # The model named (a path, or a name downloaded once), its family, and everything the loader
    # checks before the (slow) load; then what the request itself can be checked against the spec.
    plan = plan_load(ModelRef(args.model, args.family, args.revision, args.cache_dir, args.progress),
                     load_options)
    spec = plan.spec
    check_supported(spec, task, mode)
    from .captions import check_family_times_words

    check_family_times_words(spec, args.captions, args.timestamps)
    check_session_prefixes(session_options, plan.family)
    resolve_options(spec, "session", session_options, fill_defaults=False)
    options = resolve_options(spec, "request", {**request_options, **request.first_class_options()})
    check_request(spec, task, ReferenceInputs.of(spec, options, voice=args.voice_ref is not None,
                                                 voice_prompt=args.voice_prompt is not None))
    if args.voice_prompt is not None:  # the file's container, its family and transcript: before loading
        from audiocpp.engine.voice_prompt import read_prompt_dict

        check_prompt_transcript(
            spec, str(read_prompt_dict(args.voice_prompt, family=plan.family).get("ref_text") or ""))
    if cues is not None:
        from .dubbing import check_dubbing

        check_dubbing(spec, request_options)
    if args.voice_ref is not None:
        duration = audio_duration(args.voice_ref)
        if duration is None:  # an unreadable header: reading the file says why, with a hint
            from audiocpp.engine.audio.io import read_audio

            duration = read_audio(args.voice_ref).duration
        if duration is not None:
            check_reference_length(duration, options.get(REFERENCE_CAP_OPTION),
                                   name=repr(str(args.voice_ref)),
                                   transcript=bool((args.reference_text or "").strip()))
    if plan.note:
        print(f"note: {plan.note}", file=sys.stderr)
    model = load_planned(plan)
    if args.voice_prompt_out is not None and not model.supports_voice_prompts:
        raise UsageError(f"{plan.family} does not save voice prompts", hint="drop --voice-prompt-out")
    session = model.create_session(task, mode, session_options)

    progress = Progress(enabled=args.progress)

    def keep_chunk(index: int, audio) -> None:  # noqa: ANN001
        assert args.out_dir is not None
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / f"chunk_{index}.wav"
        write_audio(path, output.resample(audio), "wav16")
        kept.append(path)

    if cues is not None:
        from .dubbing import dub

        result = dub(session, request, cues, output, progress=progress, timeout=args.timeout)
    else:
        results: list[TaskResult] = []
        index = 0  # of the audio events, across the segments read from stdin
        for number, segment in enumerate([text] if text is not None
                                         else read_segments(by_line=args.stream_by_line)):
            if text is None:
                print(f"segment={number} text={segment[:60]!r}", file=sys.stderr)
            job = session.submit(replace(request, text=segment), progress=progress, deadline_s=args.timeout)
            with watched(job):
                for event in job.events():
                    if event.is_final:
                        results.append(event.result)
                        continue
                    if mode is Mode.STREAMING:
                        print(f"event=audio index={index} samples={event.audio.num_samples}", file=sys.stderr)
                    output.piece(event.audio)
                    if args.out_dir is not None:
                        keep_chunk(index, event.audio)
                    index += 1
        if not results:
            raise UsageError("the text to synthesize is empty (stdin held no text)",
                             hint="pipe text into audiocpp, or pass --text / --text-file")
        result = merge_results(results)
    if args.out_dir is not None and mode is Mode.OFFLINE:
        for i, chunk in enumerate(result.chunks):
            keep_chunk(i, chunk)
    if args.voice_prompt_out is not None:
        if result.voice_prompt is None:
            raise UsageError("this request prepared no voice to save", hint="drop --voice-prompt-out")
        result.voice_prompt.save(args.voice_prompt_out)
        kept.append(args.voice_prompt_out)
        print(f"voice_prompt_out={args.voice_prompt_out}", file=info)
    guess = result.details.get("language_guess")
    if guess:  # the text front end chose the language itself: say so, and how to choose
        print(f"note: {guess}", file=sys.stderr)
    from .captions import write_word_outputs

    kept.extend(write_word_outputs(result, args.captions, args.timestamps))
    rate, seconds = output.close(result.audio)
    if not output.to_stdout:
        kept.append(args.out)
    print(f"audio_out={args.out}", file=info)
    print(f"sample_rate={rate}", file=info)
    print(f"duration_s={seconds:.3f}", file=info)
    if args.metrics:
        for key, value in result.metrics.as_dict().items():
            print(f"{key}={value}", file=info)
        if result.words:
            import json

            print(f"words={json.dumps([w.as_dict() for w in result.words], ensure_ascii=False)}", file=info)
        built = _kernel_build_seconds() - kernel_seconds
        if built > 0.05:  # a kernel compiled while loading (set-up builds them: `audiocpp kernels`)
            print(f"kernel_build_s={built:.2f}", file=info)


def _folders_to_create(folder: Path | None) -> list[Path]:
    """The folders that writing into ``folder`` would create, innermost first."""
    missing: list[Path] = []
    while folder is not None and not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _discard_partial_output(args: RunArgs, kept: list[Path], created: list[Path]) -> None:
    """A run that fails leaves no output: the chunk files (and voice prompt) it wrote are removed,
    and the folders it created for them if they are empty again. Ctrl-C keeps them instead."""
    removed = 0
    for path in kept:
        if path == args.out:  # written last, whole: only printing the report can fail after it
            continue
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    for folder in created:
        try:
            folder.rmdir()
        except OSError:  # not empty (someone else's files) or already gone
            break
    kept.clear()
    if removed:
        print(f"note: removed the {removed} file{'s' if removed > 1 else ''} this run wrote before the error "
              "(a failed run leaves no partial output)", file=sys.stderr)


def _report_interrupt(args: RunArgs, kept: list[Path], what: str = "interrupted") -> None:
    """One line on stderr: interrupted (or terminated), and which files were written before it."""
    chunks = [p for p in kept if args.out_dir is not None and p.parent == args.out_dir]
    others = [p for p in kept if p not in chunks]
    parts = []
    if chunks:
        names = chunks[0].name if len(chunks) == 1 else f"{chunks[0].name} to {chunks[-1].name}"
        parts.append(f"kept {len(chunks)} chunk{'s' if len(chunks) > 1 else ''} in {args.out_dir} ({names})")
    parts.extend(f"kept {p}" for p in others)
    if args.out is not None and str(args.out) == "-":
        parts.append("the audio on stdout stops there")
    elif args.out is not None and args.out not in kept:
        parts.append(f"--out {args.out} was not written")
    print(f"{what}: " + ("; ".join(parts) if parts else "nothing was written"), file=sys.stderr)
