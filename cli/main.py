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

def _family_names(incomplete: str) -> list[str]:
    """Shell completion of --family: the installed families."""
    from audiocpp.engine.registry import families

    return [name for name in sorted(families()) if name.startswith(incomplete)]


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
    family: Annotated[str | None, typer.Option(
        "--family", "-f", autocompletion=_family_names,
        help="Model family (auto-detected from --model when omitted).")] = None,
    task: Annotated[str, typer.Option(
        "--task", help="tts, clon (voice cloning) or design (voice design).")] = "tts",
    model: Annotated[str | None, typer.Option(
        "--model", "-m",
        help="Model path (package GGUF, HF folder or a family's GGUF), or a name: a Hugging Face repo id "
        "(org/name) or a package id, downloaded once into the HF cache. Omit to use the family's demo "
        "model.")] = None,
    revision: Annotated[str | None, typer.Option(
        "--revision", help="Branch, tag or commit of a --model name.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir",
        help="Hugging Face cache for --model names (default: HF_HUB_CACHE or HF_HOME/hub).")] = None,
    codec: Annotated[Path | None, typer.Option(
        "--codec", help="Separate codec GGUF where a family uses one (load option 'codec').")] = None,
    text: Annotated[str | None, typer.Option(
        "--text", "-t", help="Text to synthesize ('-' reads stdin).")] = None,
    text_file: Annotated[Path | None, typer.Option(
        "--text-file", help="Read the text from a UTF-8 file.")] = None,
    voice_ref: Annotated[Path | None, typer.Option(
        "--voice-ref",
        help="Reference audio for cloning (wav/flac/ogg/mp3; any rate, stereo is mixed down).")] = None,
    reference_text: Annotated[str | None, typer.Option(
        "--reference-text", help="Transcript of --voice-ref.")] = None,
    instruct: Annotated[str | None, typer.Option("--instruct", help="Voice design description.")] = None,
    language: Annotated[str | None, typer.Option("--language", help="Language name or code.")] = None,
    voice: Annotated[str | None, typer.Option(
        "--voice", help="A named voice of the model (`audiocpp voices`), or a mix: 'jf_alpha(2)+jm_kumo(1)' "
        "(request option 'voice'; Kokoro).")] = None,
    phonemes: Annotated[str | None, typer.Option(
        "--phonemes", help="Speak this phoneme string (IPA in the model's vocabulary) instead of --text: no "
        "text-to-phoneme step (request option 'phonemes'; Kokoro).")] = None,
    speed: Annotated[float | None, typer.Option(
        "--speed", help="Speaking rate, >1 faster (request option 'speed').")] = None,
    captions: Annotated[Path | None, typer.Option(
        "--captions", help="Write word-level captions (.srt or .vtt) of the output, where the family times "
        "its words (Kokoro).")] = None,
    timestamps: Annotated[Path | None, typer.Option(
        "--timestamps", help="Write each word's start and end (seconds) as JSON, where the family times its "
        "words (Kokoro).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed (request option 'seed').")] = None,
    mode: Annotated[str, typer.Option("--mode", help="offline or streaming.")] = "offline",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o",
        help="Output audio file (the final audio in streaming mode); '-' writes to stdout (streamed as it "
        "is generated in streaming mode; everything else goes to stderr).")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="Also write each streamed/long-form chunk as chunk_N.wav here.")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format",
        help="wav16, wav24, wav32 (float), flac, ogg, mp3, opus (where libsndfile writes them) or pcm16 "
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
    voice_prompt: Annotated[Path | None, typer.Option(
        "--voice-prompt", help="Reuse a prepared voice prompt saved with --voice-prompt-out.")] = None,
    voice_prompt_out: Annotated[Path | None, typer.Option(
        "--voice-prompt-out", help="Save the prepared voice prompt of this request.")] = None,
    request_option: Annotated[list[str] | None, typer.Option(
        "--request-option", "-r", help="Request option key=value (repeatable).")] = None,
    session_option: Annotated[list[str] | None, typer.Option(
        "--session-option", "-s", help="Session option family.key=value (repeatable).")] = None,
    load_option: Annotated[list[str] | None, typer.Option(
        "--load-option", "-l", help="Load option key=value (repeatable).")] = None,
    device: Annotated[str | None, typer.Option(
        "--device",
        help="cpu (the default, or $AUDIOCPP_DEVICE), cuda, cuda:N, mps or auto (the best this machine "
        "has). Load option 'device'.")] = None,
    metrics: Annotated[bool, typer.Option(
        "--metrics", help="Print wall time, RTF, time to first audio and peak RSS.")] = False,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress",
        help="Progress bar on stderr (default: when stderr is a terminal).")] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0.001, metavar="SECONDS",
        help="Cancel the synthesis after this many seconds (from when it is queued; the load is not "
        "counted): an error, exit 124, nothing written.")] = None,
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


def _add_codec_commands() -> None:
    from .codec_cmd import codec_app

    app.add_typer(codec_app, name="codec")


_add_codec_commands()


@app.command("families")
def families_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List installed families: status, tasks, modes, languages (reads specs only)."""
    from .listing import print_families

    print_families(as_json)


@app.command("options")
def options_cmd(
    family: Annotated[str, typer.Option("--family", "-f", help="Family whose options to list.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
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
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="Model path or name (default: the default model).")] = None,
    family: Annotated[str | None, typer.Option(
        "--family", "-f", help="Family (its default/demo model).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List a model's named voices (--voice) with their languages; mixes: 'a(2)+b(1)'."""
    from .listing import print_voices

    print_voices(model, family, as_json)


@app.command("inspect")
def inspect_cmd(
    path: Annotated[Path, typer.Argument(help="A GGUF file or model folder.")],
    family: Annotated[str | None, typer.Option("--family", "-f")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show family, spec summary, namespaces, tensor counts by dtype and embedded files."""
    from .listing import print_inspection

    print_inspection(path, family, as_json)


@app.command("batch", add_help_option=False,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def batch_cmd(ctx: typer.Context) -> None:
    """Synthesize every line of a JSONL manifest, locally or on Ray (`audiocpp batch --help`)."""
    from audiocpp.batch.cli import main as batch_main

    batch_main(list(ctx.args))


@app.command("book", add_help_option=False,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def book_cmd(ctx: typer.Context) -> None:
    """Turn an EPUB, Markdown or text file into a chaptered audiobook (`audiocpp book --help`)."""
    from audiocpp.book.cli import main as book_main

    book_main(list(ctx.args))


@app.command("package")
def package_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .gguf file.")],
    inputs: Annotated[list[str], typer.Option(
        "--input", "-i",
        help="ns=PATH, or a model folder/file the spec's sources map to namespaces (repeatable).")],
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Model spec JSON (default: the family's built-in spec).")] = None,
    family: Annotated[str | None, typer.Option(
        "--family", "-f", help="Family (default: the spec's family, or detected from the input).")] = None,
    weight_type: Annotated[str, typer.Option(
        "--type", help="f32, f16, bf16, q8_0, q4_0 (float tensors of safe shape only).")] = "f32",
    keep_type: Annotated[list[str] | None, typer.Option(
        "--keep-type",
        help="'ns/glob=type' overrides, e.g. 'audio_tokenizer_weights/*=f32' (repeatable).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing output file.")] = False,
) -> None:
    """Build an audio.cpp-compatible package GGUF from upstream weights."""
    from audiocpp.engine.packaging.cli import package_from_cli

    package_from_cli(out=out, inputs=inputs, spec=spec, family=family, weight_type=weight_type,
                     keep_types=keep_type or [], overwrite=overwrite)


@app.command("download")
def download_cmd(
    name: Annotated[str | None, typer.Argument(
        help="A Hugging Face repo id (org/name[@revision], or org/name/FILE.gguf) or a package id.")] = None,
    revision: Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(
        "--cache-dir", help="Hugging Face cache folder (default: HF_HUB_CACHE or HF_HOME/hub).")] = None,
    family: Annotated[str | None, typer.Option(
        "--family", "-f", help="Fetch only the files this family reads.")] = None,
    list_: Annotated[bool, typer.Option(
        "--list", help="List the package ids of the installed specs: size, cached or not.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress",
        help="Progress bars on stderr (default: when stderr is a terminal).")] = None,
) -> None:
    """Download a model by name into the Hugging Face cache (only the files a family reads)."""
    from .download import download_from_cli

    download_from_cli(name, list_=list_, as_json=as_json, family=family, revision=revision,
                      cache_dir=cache_dir, progress=progress)


@app.command("kernels")
def kernels_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Say which kernel is building and, for a failure, the compiler's output.")] = False,
) -> None:
    """Build the C++ kernels this CPU supports (set-up does this once) and say for each what happened."""
    from .kernels_cmd import kernels_from_cli

    raise typer.Exit(kernels_from_cli(as_json=as_json, verbose=verbose))


@app.command("serve")
def serve_cmd(
    model: Annotated[list[str] | None, typer.Option(
        "--model", "-m",
        help="Model to serve: PATH or NAME=PATH (repeatable; requests pick it by name). "
        "Omit to serve the demo model.")] = None,
    family: Annotated[str | None, typer.Option(
        "--family", "-f", help="Family of the models (auto-detected when omitted).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    session_option: Annotated[list[str] | None, typer.Option(
        "--session-option", "-s",
        help="Session option family.key=value for every request (repeatable).")] = None,
    load_option: Annotated[list[str] | None, typer.Option(
        "--load-option", "-l", help="Load option [family.]key=value (repeatable).")] = None,
    voices_dir: Annotated[Path | None, typer.Option(
        "--voices-dir", help="Where uploaded voices are kept (default: ~/.cache/audiocpp/voices).")] = None,
    max_batch: Annotated[int | None, typer.Option(
        "--max-batch",
        help="Requests per model synthesized together, as rows of one batch (1: one at a time); "
        "default: what batching gains for the family on its device (8; OmniVoice on the CPU 1, "
        "docs/batching.md); more than a family's smaller size is capped to it, with a notice.")] = None,
    max_batch_force: Annotated[bool, typer.Option(
        "--max-batch-force", help="Take --max-batch as given, even above what batching gains for the "
        "family on its device.")] = False,
    batch_window_ms: Annotated[float, typer.Option(
        "--batch-window-ms",
        help="How long an idle model waits for more requests to start a batch with.")] = 20.0,
    max_concurrency: Annotated[int | None, typer.Option(
        "--max-concurrency",
        help="Requests per model synthesizing at once, as rows of its batch (at most --max-batch); "
        "default: --max-batch.")] = None,
    max_queue: Annotated[int, typer.Option(
        "--max-queue", help="Requests per model that may wait; beyond, 429 at once.")] = 8,
    max_input_chars: Annotated[int, typer.Option(
        "--max-input-chars", help="Longest input text accepted.")] = 4096,
    max_body_mb: Annotated[float, typer.Option(
        "--max-body-mb", help="Largest request body (voice uploads included), MiB.")] = 16.0,
    log_level: Annotated[str, typer.Option(
        "--log-level", help="uvicorn log level (info adds uvicorn's own line per request).")] = "warning",
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No line per request on the terminal.")] = False,
    wyoming_port: Annotated[int | None, typer.Option(
        "--wyoming-port", help="Also serve the Wyoming protocol (Home Assistant) on this TCP port.")] = None,
    wyoming_seed: Annotated[int | None, typer.Option(
        "--wyoming-seed", help="Seed of every Wyoming synthesis (Wyoming sends none; default: a fresh one "
        "per sentence), for the same audio each time.")] = None,
    http: Annotated[bool, typer.Option(
        "--http/--no-http", help="Serve HTTP (--no-http: Wyoming only).")] = True,
    wyoming_host: Annotated[str | None, typer.Option(
        "--wyoming-host", help="Address Wyoming listens on (default 127.0.0.1; Wyoming has no "
        "authentication).")] = None,
    api_key: Annotated[list[str] | None, typer.Option(
        "--api-key", help="A key clients must send (Authorization: Bearer KEY); repeatable; LABEL:KEY names "
        "it (docs/server.md, Security).")] = None,
    api_keys_file: Annotated[Path | None, typer.Option(
        "--api-keys-file", help="Keys, one a line (LABEL:KEY, admin:KEY, # comments); reloaded on "
        "SIGHUP.")] = None,
    admin_key: Annotated[list[str] | None, typer.Option(
        "--admin-key", help="A key that also lists and deletes every key's voices (repeatable).")] = None,
    insecure_no_auth: Annotated[bool, typer.Option(
        "--insecure-no-auth", help="Listen beyond this machine without keys, on purpose.")] = False,
    metrics_public: Annotated[bool, typer.Option(
        "--metrics-public", help="Serve /metrics to every client (default: this machine and admin "
        "keys).")] = False,
    max_voices_per_key: Annotated[int, typer.Option(
        "--max-voices-per-key", help="Stored voices one key may keep.")] = 32,
    rate_limit: Annotated[str | None, typer.Option(
        "--rate-limit", help="Requests per key, e.g. 60/min (429 with Retry-After beyond).")] = None,
    audio_limit: Annotated[str | None, typer.Option(
        "--audio-limit", help="Seconds of audio synthesized per key, e.g. 3600/day.")] = None,
    max_queue_per_key: Annotated[int | None, typer.Option(
        "--max-queue-per-key", help="Requests of one key that may wait per model (default: half of "
        "--max-queue).")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(
        "--ssl-certfile", help="Serve HTTPS and WSS with this PEM certificate (with --ssl-keyfile).")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(
        "--ssl-keyfile", help="The PEM private key of --ssl-certfile.")] = None,
    access_log: Annotated[str | None, typer.Option(
        "--access-log", help="One JSON line per request to FILE (- for stdout); reopened on SIGHUP.")] = None,
    log_text: Annotated[bool, typer.Option(
        "--log-text", help="Also write the text of each request into the access log.")] = False,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Serve as a Ray Serve application on a local Ray instance (pip install "
        "'audiocpp[ray]'; docs/server.md, On a Ray cluster).")] = False,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="Serve on the Ray cluster at this address (HEAD:6379).")] = None,
    replicas: Annotated[int | None, typer.Option(
        "--replicas", help="Ray Serve replicas of each model, each loading it once (default 1).")] = None,
    autoscale: Annotated[str | None, typer.Option(
        "--autoscale", help="MIN:MAX replicas of each model, scaled by Ray Serve on requests in progress "
        "(target: --max-batch per replica).")] = None,
    num_cpus: Annotated[float | None, typer.Option(
        "--num-cpus", help="CPUs each replica reserves on Ray (default 1).")] = None,
    num_gpus: Annotated[float, typer.Option(
        "--num-gpus", help="GPUs each replica reserves on Ray (default 0).")] = 0.0,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="With --ray: write the Ray Serve config file (serve run / serve deploy / "
        "KubeRay) and exit.")] = False,
    drain_s: Annotated[float, typer.Option(
        "--drain-s", help="At Ctrl-C or SIGTERM, seconds requests in progress may take to finish.")] = 5.0,
) -> None:
    """Serve models over HTTP: OpenAI's /v1/audio/speech, stored voices, metrics and a playground page."""
    from audiocpp.server.cli import ServeArgs, check_ray, on_ray, serve

    args = ServeArgs(models=model or [], family=family, host=host, port=port,
                    session_options=session_option or [], load_options=load_option or [],
                    voices_dir=voices_dir, max_concurrency=max_concurrency,
                    max_queue=max_queue, max_batch=max_batch, max_batch_force=max_batch_force,
                    batch_window_ms=batch_window_ms, quiet=quiet,
                    max_input_chars=max_input_chars, max_body_mb=max_body_mb, log_level=log_level,
                    wyoming_port=wyoming_port, wyoming_seed=wyoming_seed, http=http,
                    wyoming_host=wyoming_host, api_keys=api_key or [], api_keys_file=api_keys_file,
                    admin_keys=admin_key or [], insecure_no_auth=insecure_no_auth,
                    metrics_public=metrics_public, max_voices_per_key=max_voices_per_key,
                    rate_limit=rate_limit, audio_limit=audio_limit, max_queue_per_key=max_queue_per_key,
                    ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, access_log=access_log,
                    log_text=log_text, ray=ray, ray_address=ray_address, replicas=replicas,
                    autoscale=autoscale, num_cpus=num_cpus, num_gpus=num_gpus, print_config=print_config,
                    drain_s=drain_s)
    if on_ray(args):  # Ray Serve's app imports ray: checked first, so a missing extra is one usage error
        check_ray(args)
        from audiocpp.server.ray_serve import serve_on_ray

        serve_on_ray(args)
        return
    serve(args)


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
