"""The ``audiocpp`` command line.

``audiocpp --family X --task tts|clon|design --model PATH --text ... --out FILE`` runs a
request; ``families``, ``inspect``, ``package`` and ``options`` are subcommands. Every
option a family takes comes from its spec. Errors users can cause print one message and
exit 2 (usage) or 1 (runtime) without a traceback, and never leave a partial output file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from audiocpp.engine.errors import AudiocppError, UsageError

from . import options as opt

#: The exit status of a run whose deadline (--timeout) passed: coreutils timeout's
TIMEOUT_EXIT = 124

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish and PowerShell
    no_args_is_help=False,
    invoke_without_command=True,
    context_settings={"help_option_names": ["--help", "-h"]},
    help="Run open TTS models (OmniVoice, VoxCPM1/2, Audio8 TTS) from one CLI. "
    "`audiocpp --family X --help` also lists the family's options.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

def _print_version(value: bool) -> None:
    if value:
        import audiocpp

        print(f"audiocpp {audiocpp.__version__}")
        raise typer.Exit()


@app.callback()
def synthesize(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_print_version,
        help="Print audiocpp's version and exit.")] = False,
    family: Annotated[str | None, opt.family()] = None,
    task: Annotated[str, opt.task()] = "tts",
    model: Annotated[str | None, opt.model(
        "Model path (package GGUF, HF folder or a family's GGUF), or a name: a Hugging Face repo id "
        "(org/name) or a package id, downloaded once into the HF cache. Omit to use the family's demo "
        "model.")] = None,
    revision: Annotated[str | None, opt.revision()] = None,
    cache_dir: Annotated[Path | None, opt.cache_dir()] = None,
    codec: Annotated[Path | None, opt.codec()] = None,
    text: Annotated[str | None, typer.Option(
        "--text", "-t", help="Text to synthesize ('-' reads stdin).")] = None,
    text_file: Annotated[Path | None, typer.Option(
        "--text-file", help="Read the text from a UTF-8 file.")] = None,
    voice_ref: Annotated[Path | None, opt.voice_ref()] = None,
    reference_text: Annotated[str | None, opt.reference_text()] = None,
    instruct: Annotated[str | None, opt.instruct()] = None,
    language: Annotated[str | None, opt.language()] = None,
    voice: Annotated[str | None, opt.voice()] = None,
    phonemes: Annotated[str | None, typer.Option(
        "--phonemes", help="Speak this phoneme string (IPA in the model's vocabulary) instead of --text: no "
        "text-to-phoneme step (request option 'phonemes'; Kokoro).")] = None,
    speed: Annotated[float | None, opt.speed()] = None,
    captions: Annotated[Path | None, typer.Option(
        "--captions", help="Write word-level captions (.srt or .vtt) of the output, where the family times "
        "its words (Kokoro).")] = None,
    timestamps: Annotated[Path | None, typer.Option(
        "--timestamps", help="Write each word's start and end (seconds) as JSON, where the family times its "
        "words (Kokoro).")] = None,
    seed: Annotated[int | None, opt.seed()] = None,
    mode: Annotated[str, typer.Option("--mode", help="offline or streaming.")] = "offline",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o",
        help="Output audio file (the final audio in streaming mode); '-' writes to stdout (streamed as it "
        "is generated in streaming mode; everything else goes to stderr).")] = None,
    out_dir: Annotated[Path | None, opt.out_dir(
        "Also write each streamed/long-form chunk as chunk_N.wav here.")] = None,
    fmt: Annotated[str | None, opt.fmt(
        "wav16, wav24, wav32 (float), flac, ogg, mp3, opus (where libsndfile writes them) or pcm16 "
        "(raw); default from --out's extension (stdout: wav16).")] = None,
    sample_rate: Annotated[int | None, typer.Option(
        "--sample-rate", help="Resample the output to this rate (Hz).")] = None,
    srt: Annotated[Path | None, typer.Option(
        "--srt",
        help="Dub an SRT file: each cue spoken in its time slot, one timeline out "
        "(see docs/cli.md).")] = None,
    stream_by_line: Annotated[bool, typer.Option(
        "--stream-by-line",
        help="With --mode streaming and text on stdin: synthesize each line as it arrives (default: each "
        "sentence).")] = False,
    voice_prompt: Annotated[Path | None, opt.voice_prompt()] = None,
    voice_prompt_out: Annotated[Path | None, typer.Option(
        "--voice-prompt-out", help="Save the prepared voice prompt of this request.")] = None,
    request_option: Annotated[list[str] | None, opt.request_option()] = None,
    session_option: Annotated[list[str] | None, opt.session_option()] = None,
    load_option: Annotated[list[str] | None, opt.load_option()] = None,
    device: Annotated[str | None, opt.device()] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics", help="Print wall time, RTF, time to first audio and peak RSS.")] = False,
    progress: Annotated[bool | None, opt.progress()] = None,
    timeout: Annotated[float | None, opt.timeout(
        "Cancel the synthesis after this many seconds (from when it is queued; the load is not "
        "counted): an error, exit 124, nothing written.", minimum=0.001)] = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from .run import RunArgs, run_request

    args = RunArgs(
        family=family, task=task, model=model, codec=codec, text=text, text_file=text_file,
        voice_ref=voice_ref, reference_text=reference_text, instruct=instruct, language=language,
        voice=voice, phonemes=phonemes, speed=speed, captions=captions, timestamps=timestamps, seed=seed,
        mode=mode, out=out, out_dir=out_dir, fmt=fmt, voice_prompt=voice_prompt,
        voice_prompt_out=voice_prompt_out, request_options=request_option or [],
        session_options=session_option or [], load_options=load_option or [], metrics=metrics,
        progress=progress, revision=revision, cache_dir=cache_dir, sample_rate=sample_rate, srt=srt,
        stream_by_line=stream_by_line, device=device, timeout=timeout,
    )
    run_request(args)


@app.command("families")
def families_cmd(
    as_json: Annotated[bool, opt.json_output()] = False,
) -> None:
    """List installed families: status, tasks, modes, languages (reads specs only)."""
    from .listing import print_families

    print_families(as_json)


@app.command("options")
def options_cmd(
    family: Annotated[str, opt.family("Family whose options to list.")],
    as_json: Annotated[bool, opt.json_output()] = False,
) -> None:
    """Print a family's request, session and load options from its spec."""
    from audiocpp.engine.registry import get_family
    from audiocpp.engine.spec.options import format_options

    spec = get_family(family).spec
    if as_json:
        print(json.dumps(spec.options.model_dump(exclude_none=True), indent=2))
    else:
        print(format_options(spec))


@app.command("voices")
def voices_cmd(
    model: Annotated[str | None, opt.model("Model path or name (default: the default model).")] = None,
    family: Annotated[str | None, opt.family("Family (its default/demo model).")] = None,
    as_json: Annotated[bool, opt.json_output()] = False,
) -> None:
    """List a model's named voices (--voice) with their languages; mixes: 'a(2)+b(1)'."""
    from .listing import print_voices

    print_voices(model, family, as_json)


@app.command("inspect")
def inspect_cmd(
    path: Annotated[Path, typer.Argument(help="A GGUF file or model folder.")],
    family: Annotated[str | None, opt.family()] = None,
    as_json: Annotated[bool, opt.json_output()] = False,
) -> None:
    """Show family, spec summary, namespaces, tensor counts by dtype and embedded files."""
    from .listing import print_inspection

    print_inspection(path, family, as_json)


@app.command("package")
def package_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .gguf file.")],
    inputs: Annotated[list[str], typer.Option(
        "--input", "-i",
        help="ns=PATH, or a model folder/file the spec's sources map to namespaces (repeatable).")],
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Model spec JSON (default: the family's built-in spec).")] = None,
    family: Annotated[str | None, opt.family(
        "Family (default: the spec's family, or detected from the input).")] = None,
    weight_type: Annotated[str, typer.Option(
        "--type", help="f32, f16, bf16, q8_0, q4_0 (float tensors of safe shape only).")] = "f32",
    keep_type: Annotated[list[str] | None, typer.Option(
        "--keep-type",
        help="'ns/glob=type' overrides, e.g. 'audio_tokenizer_weights/*=f32' (repeatable).")] = None,
    overwrite: Annotated[bool, opt.overwrite("Replace an existing output file.")] = False,
) -> None:
    """Build an audio.cpp-compatible package GGUF from upstream weights."""
    from audiocpp.engine.packaging.cli import package_from_cli

    package_from_cli(out=out, inputs=inputs, spec=spec, family=family, weight_type=weight_type,
                     keep_types=keep_type or [], overwrite=overwrite)


@app.command("download")
def download_cmd(
    name: Annotated[str | None, typer.Argument(
        help="A Hugging Face repo id (org/name[@revision], or org/name/FILE.gguf) or a package id.")] = None,
    revision: Annotated[str | None, opt.revision("Branch, tag or commit.")] = None,
    cache_dir: Annotated[Path | None, opt.cache_dir(
        "Hugging Face cache folder (default: HF_HUB_CACHE or HF_HOME/hub).")] = None,
    family: Annotated[str | None, opt.family("Fetch only the files this family reads.")] = None,
    list_: Annotated[bool, typer.Option(
        "--list", help="List the package ids of the installed specs: size, cached or not.")] = False,
    as_json: Annotated[bool, opt.json_output()] = False,
    progress: Annotated[bool | None, opt.progress(
        "Progress bars on stderr (default: when stderr is a terminal).")] = None,
) -> None:
    """Download a model by name into the Hugging Face cache (only the files a family reads)."""
    from .download import download_from_cli

    download_from_cli(name, list_=list_, as_json=as_json, family=family, revision=revision,
                      cache_dir=cache_dir, progress=progress)


@app.command("kernels")
def kernels_cmd(
    as_json: Annotated[bool, opt.json_output()] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Say which kernel is building and, for a failure, the compiler's output.")] = False,
) -> None:
    """Build the C++ kernels this CPU supports (set-up does this once) and say for each what happened."""
    from .kernels_cmd import kernels_from_cli

    raise typer.Exit(kernels_from_cli(as_json=as_json, verbose=verbose))


def _add_subcommands() -> None:
    """The subcommands declared in their own modules (their flags: cli/options.py where shared)."""
    from . import batch_cmd, book_cmd, serve_cmd
    from .codec_cmd import codec_app

    app.add_typer(codec_app, name="codec")
    app.command("batch", help=batch_cmd.HELP, short_help=batch_cmd.SHORT_HELP)(batch_cmd.batch)
    app.command("book", help=book_cmd.HELP, short_help=book_cmd.SHORT_HELP)(book_cmd.book)
    app.command("serve")(serve_cmd.serve)


_add_subcommands()


def _family_help(argv: list[str]) -> str | None:
    """`audiocpp --family X --help`: the family's options after the general help."""
    if not any(a in ("--help", "-h") for a in argv):
        return None
    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    for i, arg in enumerate(argv):
        if arg in commands:
            return None  # `audiocpp download --family X --help`: the subcommand's own help
        if arg in ("--family", "-f") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--family="):
            return arg.split("=", 1)[1]
    return None


def _interrupted_in_subcommand(exc: SystemExit) -> bool:
    """Typer turns Ctrl-C inside a subcommand into a silent exit 130 (``Exit(130)`` from the
    KeyboardInterrupt); the main command prints its own line before its exit 130."""
    inner = exc.__context__
    return exc.code == 130 and inner is not None and type(inner).__name__ == "Exit" \
        and isinstance(inner.__cause__, KeyboardInterrupt)


class Terminated(SystemExit):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt, so that cleanup runs
    (temporary outputs removed: no partial file) and the exit code is the shell's 128 + 15."""


#: the signals received: native code (safetensors' reader, numpy) can swallow the exception a
#: handler raised and raise its own instead, which must still end as the signal's exit
_RECEIVED: list[int] = []


def _cancel_jobs(signum: int) -> None:
    """The one cancellation path: the jobs the command waits on are cancelled (their rows leave the
    batch at the next step), then the main thread unwinds as before (engine/execution/watch.py)."""
    watch = sys.modules.get("audiocpp.engine.execution.watch")  # not imported: no job was submitted
    if watch is not None:
        name = "terminated" if signum == 15 else "interrupted"
        watch.cancel_watched(watch.Cancelled(f"{name} (signal {signum})", signal=signum))


def _on_sigterm(signum: int, frame: object) -> None:
    _RECEIVED.append(signum)
    _cancel_jobs(signum)
    raise Terminated(128 + signum)


def _on_sigint(signum: int, frame: object) -> None:
    _RECEIVED.append(signum)
    _cancel_jobs(signum)
    raise KeyboardInterrupt


def _exit_if_signalled() -> None:
    """After an error: when a signal arrived, end as that signal (one line, 128 + its number)."""
    if _RECEIVED:
        import signal

        sig = _RECEIVED[-1]
        print("terminated" if sig == signal.SIGTERM else "interrupted", file=sys.stderr)
        raise SystemExit(128 + sig) from None


def main(argv: list[str] | None = None) -> None:
    import signal

    argv = list(sys.argv[1:] if argv is None else argv)
    previous: dict[int, object] = {}
    try:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when Ctrl-C is ignored
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread: leave signals alone
        pass
    try:
        _main(argv)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(argv: list[str]) -> None:
    try:
        family = _family_help(argv)
        if family is not None:
            from audiocpp.engine.registry import get_family
            from audiocpp.engine.spec.options import format_options

            spec = get_family(family).spec
            try:
                app(args=["--help"], prog_name="audiocpp", standalone_mode=False)
            except SystemExit:
                pass
            print()
            print(format_options(spec))
            if not spec.runnable:
                print(f"\nnote: {family} has status {spec.status!r}: {spec.status_note}")
            raise SystemExit(0)
        app(args=argv, prog_name="audiocpp")
    except AudiocppError as exc:
        _exit_if_signalled()
        _print_error(exc)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Terminated:
        print("terminated", file=sys.stderr)
        raise
    except SystemExit as exc:
        if _interrupted_in_subcommand(exc):
            print("interrupted", file=sys.stderr)
        raise
    except Exception as exc:  # an internal bug: say so plainly, traceback on request
        _exit_if_signalled()
        if getattr(exc, "deadline_s", None) is not None:  # a job's deadline (--timeout) passed: Cancelled
            print(f"error: {exc}", file=sys.stderr)
            print("  hint: give it more time (--timeout SECONDS), or less to do", file=sys.stderr)
            raise SystemExit(TIMEOUT_EXIT) from None
        if os.environ.get("AUDIOCPP_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("  this is a bug in audiocpp; rerun with AUDIOCPP_DEBUG=1 for the traceback", file=sys.stderr)
        raise SystemExit(1) from None


def _print_error(exc: AudiocppError) -> None:
    print(f"error: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"  hint: {exc.hint}", file=sys.stderr)


__all__ = ["UsageError", "app", "main"]
