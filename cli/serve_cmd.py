"""``audiocpp serve``: its flags (the server is audiocpp.server; shared flags: cli/options.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import options as opt


def serve(
    model: Annotated[list[str] | None, opt.model(
        "Model to serve: PATH or NAME=PATH (repeatable; requests pick it by name). "
        "Omit to serve the demo model.")] = None,
    family: Annotated[str | None, opt.family("Family of the models (auto-detected when omitted).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    session_option: Annotated[list[str] | None, opt.session_option(
        "Session option family.key=value for every request (repeatable).")] = None,
    load_option: Annotated[list[str] | None, opt.load_option(
        "Load option [family.]key=value (repeatable).")] = None,
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
    quiet: Annotated[bool, opt.quiet("No line per request on the terminal.")] = False,
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
    ray: Annotated[bool, opt.ray("Serve as a Ray Serve application on a local Ray instance (pip install "
        "'audiocpp[ray]'; docs/server.md, On a Ray cluster).")] = False,
    ray_address: Annotated[str | None, opt.ray_address(
        "Serve on the Ray cluster at this address (HEAD:6379).")] = None,
    replicas: Annotated[int | None, typer.Option(
        "--replicas", help="Ray Serve replicas of each model, each loading it once (default 1).")] = None,
    autoscale: Annotated[str | None, typer.Option(
        "--autoscale", help="MIN:MAX replicas of each model, scaled by Ray Serve on requests in progress "
        "(target: --max-batch per replica).")] = None,
    num_cpus: Annotated[float | None, opt.num_cpus("CPUs each replica reserves on Ray (default 1).")] = None,
    num_gpus: Annotated[float, opt.num_gpus("GPUs each replica reserves on Ray (default 0).")] = 0.0,
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
