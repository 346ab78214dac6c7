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
    max_batch: int = 8
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


def build_state(args: ServeArgs):
    """Check the arguments, load the models and make the server state (no socket yet)."""
    from audiocpp.engine.spec.options import parse_key_values

    from .app import ServerState
    from .metrics import ServerMetrics
    from .models import ModelArg, load_models
    from .scheduler import ModelWorker
    from .voices import VoiceStore

    if args.max_batch < 1:
        raise UsageError(f"--max-batch {args.max_batch} must be at least 1",
                         hint="--max-batch 1: one request at a time")
    if args.max_concurrency is None:
        args.max_concurrency = args.max_batch
    if args.max_concurrency < 1:
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
    session_options = parse_key_values(args.session_options, flag="--session-option")
    load_options = parse_key_values(args.load_options, flag="--load-option")
    voices_dir = args.voices_dir or default_voices_dir()
    try:
        voices = VoiceStore(voices_dir)
    except OSError as error:
        raise UsageError(f"cannot use --voices-dir {str(voices_dir)!r}: {error.strerror or error}") from None
    models = load_models([ModelArg.parse(m) for m in args.models], args.family, session_options, load_options)
    metrics = ServerMetrics()
    workers = {name: ModelWorker(name, served.model, args.max_concurrency, args.max_queue,
                                 max_batch=args.max_batch, window_s=args.batch_window_ms / 1000,
                                 on_cancel=lambda name=name: metrics.count_cancelled(name),
                                 on_group=lambda size, name=name: metrics.observe_batch(name, size),
                                 on_join=lambda waited, name=name: metrics.observe_join_wait(name, waited))
               for name, served in models.items()}
    return ServerState(models=models, workers=workers, voices=voices, metrics=metrics,
                       max_input_chars=args.max_input_chars, max_body_bytes=int(args.max_body_mb * (1 << 20)),
                       wyoming_seed=args.wyoming_seed)


def serve(args: ServeArgs) -> None:
    require_extra()
    if not args.http and args.wyoming_port is None:
        raise UsageError("--no-http leaves nothing to serve",
                         hint="add --wyoming-port N (Home Assistant's Wyoming)")
    if args.wyoming_port is not None and not 0 <= args.wyoming_port <= 65535:
        raise UsageError(f"--wyoming-port {args.wyoming_port} is not a port number")
    if args.wyoming_seed is not None and not 0 <= args.wyoming_seed < 1 << 63:
        raise UsageError(f"--wyoming-seed {args.wyoming_seed} is out of range; use 0 to 2**63 - 1")
    sockets = []
    try:
        sock = listen(args.host, args.port) if args.http else None
        if sock is not None:
            sockets.append(sock)
        wyoming_sock = (listen(args.host, args.wyoming_port, flag="--wyoming-port")
                        if args.wyoming_port is not None else None)
        if wyoming_sock is not None:
            sockets.append(wyoming_sock)
        state = build_state(args)
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


def _announce_wyoming(sock: socket.socket) -> None:
    host, port = sock.getsockname()[:2]
    print(f"audiocpp serve: Wyoming on tcp://{host}:{port}", file=sys.stderr)


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
        _announce_wyoming(wyoming_sock)
    server.run(sockets=[sock])


def _run_wyoming(state, sock: socket.socket) -> None:
    """Wyoming alone (``--no-http``), until SIGINT / SIGTERM."""
    import asyncio
    import signal

    from . import wyoming

    async def main() -> None:
        server = await wyoming.start(state, sock)
        _announce_wyoming(sock)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(main())
