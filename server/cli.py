"""``audiocpp serve``: load the models, build the app, run uvicorn."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from audiocpp.engine.errors import AudiocppError, UsageError


@dataclass
class ServeArgs:
    models: list[str] = field(default_factory=list)
    family: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    session_options: list[str] = field(default_factory=list)
    load_options: list[str] = field(default_factory=list)
    voices_dir: Path | None = None
    max_concurrency: int | None = None  # default: max_batch
    max_queue: int = 8
    max_batch: int | None = None  # default: per family and device (FamilyPlugin.max_batch)
    batch_window_ms: float = 20.0
    max_input_chars: int = 4096
    max_body_mb: float = 16.0
    log_level: str = "warning"
    wyoming_port: int | None = None
    wyoming_seed: int | None = None  # Wyoming has no seed field
    http: bool = True


#: The serve extra: importable module names (any of) -> the package to install.
EXTRA_MODULES = {("fastapi",): "fastapi", ("uvicorn",): "uvicorn",
                 ("python_multipart", "multipart"): "python-multipart",
                 ("websockets",): "websockets", ("wyoming",): "wyoming"}


def require_extra() -> None:
    """The serve extra's packages, or one clear error naming the install command."""
    import importlib

    missing = []
    for modules, package in EXTRA_MODULES.items():
        for module in modules:
            try:
                importlib.import_module(module)
                break
            except ImportError:
                continue
        else:
            missing.append(package)
    if missing:
        raise AudiocppError(f"audiocpp serve needs {', '.join(missing)}, which is not installed",
                            hint="pip install 'audiocpp[serve]' (tools/setup_env.sh installs it)")


def listen(host: str, port: int, flag: str = "--port") -> socket.socket:
    """Bind the listening socket before the (slow) model loads, so a taken port fails at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise AudiocppError(f"cannot listen on {host}:{port}: {error.strerror or error}",
                            hint="pass an address of this machine with --host (127.0.0.1, 0.0.0.0)") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise AudiocppError(f"cannot listen on {host}:{port}: {error.strerror or error}",
                            hint=f"is another server using the port? pick another with {flag}") from None
    sock.set_inheritable(True)
    return sock


def default_voices_dir() -> Path:
    from audiocpp.engine.weights.package import cache_dir

    return cache_dir() / "voices"


def check_args(args: ServeArgs) -> None:
    """The flags alone, before anything else (a bad flag is exit 2 whatever the port or models)."""
    if args.max_batch is not None and args.max_batch < 1:
        raise UsageError(f"--max-batch {args.max_batch} must be at least 1",
                         hint="--max-batch 1: one request at a time")
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise UsageError(f"--max-concurrency {args.max_concurrency} must be at least 1")
    if args.batch_window_ms < 0:
        raise UsageError(f"--batch-window-ms {args.batch_window_ms:g} must be 0 or more")
    if args.max_queue < 0:
        raise UsageError(f"--max-queue {args.max_queue} must be 0 or more")
    if args.max_input_chars < 1:
        raise UsageError(f"--max-input-chars {args.max_input_chars} must be at least 1")
    if args.max_body_mb <= 0:
        raise UsageError(f"--max-body-mb {args.max_body_mb} must be positive")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port number")
    if not args.http and args.wyoming_port is None:
        raise UsageError("--no-http leaves nothing to serve",
                         hint="add --wyoming-port N (Home Assistant's Wyoming)")
    if args.wyoming_port is not None and not 0 <= args.wyoming_port <= 65535:
        raise UsageError(f"--wyoming-port {args.wyoming_port} is not a port number")
    if args.wyoming_seed is not None and not 0 <= args.wyoming_seed < 1 << 63:
        raise UsageError(f"--wyoming-seed {args.wyoming_seed} is out of range; use 0 to 2**63 - 1")


@dataclass
class Planned:
    """What start-up checked before binding a port: the voice store and the models' plans."""

    voices: object
    models: list


def plan(args: ServeArgs) -> Planned:
    """Flags, options, the voices folder and every model planned (names downloaded, families
    detected, options checked), nothing loaded: every usage error comes before the port is bound."""
    from audiocpp.engine.spec.options import parse_key_values

    from .models import ModelArg, plan_models
    from .voices import VoiceStore

    check_args(args)
    session_options = parse_key_values(args.session_options, flag="--session-option")
    load_options = parse_key_values(args.load_options, flag="--load-option")
    voices_dir = args.voices_dir or default_voices_dir()
    try:
        voices = VoiceStore(voices_dir)
    except OSError as error:
        raise UsageError(f"cannot use --voices-dir {str(voices_dir)!r}: {error.strerror or error}") from None
    models = plan_models([ModelArg.parse(m) for m in args.models], args.family, session_options, load_options)
    return Planned(voices, models)


def build_state(args: ServeArgs, planned: Planned | None = None):
    """Load the planned models and make the server state (no socket yet)."""
    from .app import ServerState
    from .metrics import ServerMetrics
    from .models import load_models
    from .scheduler import ModelWorker

    planned = planned or plan(args)
    models = load_models(planned.models)
    metrics = ServerMetrics()
    batch = {name: args.max_batch or served.model.default_max_batch() for name, served in models.items()}
    workers = {name: ModelWorker(name, served.model, args.max_concurrency or batch[name], args.max_queue,
                                 max_batch=batch[name], window_s=args.batch_window_ms / 1000,
                                 on_cancel=lambda name=name: metrics.count_cancelled(name),
                                 on_group=lambda size, name=name: metrics.observe_batch(name, size),
                                 on_join=lambda waited, name=name: metrics.observe_join_wait(name, waited))
               for name, served in models.items()}
    return ServerState(models=models, workers=workers, voices=planned.voices, metrics=metrics,
                       max_input_chars=args.max_input_chars, max_body_bytes=int(args.max_body_mb * (1 << 20)),
                       wyoming_seed=args.wyoming_seed)


def serve(args: ServeArgs) -> None:
    require_extra()
    planned = plan(args)  # every flag, option and model checked before a port is bound
    sockets = []
    try:
        sock = listen(args.host, args.port) if args.http else None
        if sock is not None:
            sockets.append(sock)
        wyoming_sock = (listen(args.host, args.wyoming_port, flag="--wyoming-port")
                        if args.wyoming_port is not None else None)
        if wyoming_sock is not None:
            sockets.append(wyoming_sock)
        state = build_state(args, planned)
        names = ", ".join(f"{n} ({m.family}, {m.model.sample_rate} Hz)" for n, m in state.models.items())
        print(f"audiocpp serve: {names}; voices in {state.voices.folder}", file=sys.stderr)
        try:
            if sock is not None:
                _run_http(args, state, sock, wyoming_sock)
            else:
                _run_wyoming(state, wyoming_sock)
        finally:
            state.shutdown()
    finally:
        for s in sockets:
            s.close()


def _announce_wyoming(sock: socket.socket, state) -> None:
    """Where Wyoming listens, and how Home Assistant reaches every model: through the voices of the
    one text-to-speech service it sees."""
    host, port = sock.getsockname()[:2]
    models = ", ".join(state.models)
    how = ("its voice 'default'" if len(state.models) == 1
           else f"a voice per model ({models}; MODEL/VOICE for stored voices)")
    print(f"audiocpp serve: Wyoming on tcp://{host}:{port}: Home Assistant sees one text-to-speech service, "
          f"audiocpp, with {how}", file=sys.stderr)


def _run_http(args: ServeArgs, state, sock: socket.socket, wyoming_sock: socket.socket | None) -> None:
    import uvicorn

    from .app import create_app

    app = create_app(state, wyoming_socket=wyoming_sock)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=5,
                            access_log=args.log_level in ("info", "debug", "trace"))
    server = uvicorn.Server(config)
    host, port = sock.getsockname()[:2]
    print(f"audiocpp serve: listening on http://{host}:{port} (playground at /)", file=sys.stderr)
    if wyoming_sock is not None:
        _announce_wyoming(wyoming_sock, state)
    server.run(sockets=[sock])


def _run_wyoming(state, sock: socket.socket) -> None:
    """Wyoming alone (``--no-http``), until SIGINT / SIGTERM."""
    import asyncio
    import signal

    from . import wyoming

    async def main() -> None:
        server = await wyoming.start(state, sock)
        _announce_wyoming(sock, state)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.aclose()

    asyncio.run(main())
