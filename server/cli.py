"""``audiocpp serve``: load the models, build the app, run uvicorn."""

from __future__ import annotations

import os
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
    max_batch_force: bool = False  # --max-batch as given, even above a family's measured size
    batch_window_ms: float = 20.0
    max_input_chars: int = 4096
    max_body_mb: float = 16.0
    log_level: str = "warning"
    quiet: bool = False  # no line per request on the terminal (server/request_log.py)
    wyoming_port: int | None = None
    wyoming_seed: int | None = None  # Wyoming has no seed field
    http: bool = True
    wyoming_host: str | None = None  # default: 127.0.0.1 (Wyoming has no authentication)
    # -- who may use it (docs/server.md, "Security") --
    api_keys: list[str] = field(default_factory=list)  # KEY or LABEL:KEY
    api_keys_file: Path | None = None
    admin_keys: list[str] = field(default_factory=list)
    insecure_no_auth: bool = False
    metrics_public: bool = False
    max_voices_per_key: int = 32
    rate_limit: str | None = None  # N/min
    audio_limit: str | None = None  # SECONDS/day
    max_queue_per_key: int | None = None  # default: half of max_queue (rounded up)
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    access_log: str | None = None  # a file, or - for stdout
    log_text: bool = False
    env_keys: str | None = None  # AUDIOCPP_API_KEYS (read by plan when None)
    # -- on Ray Serve (docs/server.md, "On a Ray cluster") --
    ray: bool = False  # a local Ray instance for the run
    ray_address: str | None = None  # an existing cluster
    replicas: int | None = None  # per model (default 1)
    autoscale: str | None = None  # MIN:MAX replicas per model
    num_cpus: float | None = None  # per replica (default 1)
    num_gpus: float = 0.0  # per replica
    print_config: bool = False  # write the Ray Serve config file instead of serving
    drain_s: float = 5.0  # at Ctrl-C / SIGTERM: how long requests in progress may take to finish


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
    check_ray_args(args)
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
    if not args.http and args.wyoming_host is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(f"--host {args.host} is where HTTP listens, and --no-http serves none",
                         hint="Wyoming listens on --wyoming-host (default 127.0.0.1): pass --wyoming-host "
                         f"{args.host} for Home Assistant on another machine")
    if args.max_voices_per_key < 1:
        raise UsageError(f"--max-voices-per-key {args.max_voices_per_key} must be at least 1")
    if args.max_queue_per_key is not None and not 0 <= args.max_queue_per_key <= args.max_queue:
        raise UsageError(f"--max-queue-per-key {args.max_queue_per_key} must be from 0 to --max-queue "
                         f"({args.max_queue})")
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        raise UsageError("--ssl-certfile and --ssl-keyfile go together",
                         hint="give the certificate (PEM) and its private key (PEM)")
    if args.log_text and args.access_log is None:
        raise UsageError("--log-text writes the text into the access log, and there is none",
                         hint="add --access-log FILE (or - for stdout)")


def on_ray(args: ServeArgs) -> bool:
    return args.ray or bool(args.ray_address)


def parse_autoscale(text: str) -> tuple[int, int]:
    """``--autoscale MIN:MAX``: the replicas of each model Ray Serve scales between."""
    import re

    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text or "")
    if match is None:
        raise UsageError(f"--autoscale {text!r} is not MIN:MAX", hint="for example --autoscale 1:4")
    low, high = int(match.group(1)), int(match.group(2))
    if low < 1 or high < low:
        raise UsageError(f"--autoscale {text!r}: MIN must be at least 1 and MAX at least MIN",
                         hint="for example --autoscale 1:4 (a model without a replica could not answer)")
    return low, high


def check_ray_args(args: ServeArgs) -> None:
    """The flags of a server on Ray Serve, and the flags only such a server takes."""
    if args.drain_s < 0:
        raise UsageError(f"--drain-s {args.drain_s:g} must be 0 or more")
    if not on_ray(args):
        given = ((args.replicas is not None, "--replicas"), (args.autoscale is not None, "--autoscale"),
                 (args.num_cpus is not None, "--num-cpus"), (args.num_gpus != 0, "--num-gpus"),
                 (args.print_config, "--print-config"))
        for flag in (flag for set_, flag in given if set_):
            raise UsageError(f"{flag} is for a server on Ray Serve",
                             hint="add --ray (a local Ray instance) or --ray-address ADDR (a Ray cluster)")
        return
    if args.replicas is not None and args.autoscale is not None:
        raise UsageError("--replicas and --autoscale both set the replicas of each model: give one")
    if args.replicas is not None and args.replicas < 1:
        raise UsageError(f"--replicas {args.replicas} must be at least 1")
    if args.autoscale is not None:
        parse_autoscale(args.autoscale)
    if args.num_cpus is not None and args.num_cpus < 0:
        raise UsageError(f"--num-cpus {args.num_cpus:g} must be 0 or more")
    if args.num_gpus < 0:
        raise UsageError(f"--num-gpus {args.num_gpus:g} must be 0 or more")
    if args.wyoming_port is not None or not args.http:
        raise UsageError("Wyoming (--wyoming-port, --no-http) is not served on Ray Serve, whose proxy "
                         "carries HTTP and WebSockets only",
                         hint="run a single-machine `audiocpp serve --wyoming-port N` for Home Assistant")


def check_ray(args: ServeArgs) -> None:
    """What ``--ray`` / ``--ray-address`` need before anything is imported or started: every flag
    (exit 2 for a bad one), the server extra and Ray Serve (one usage error naming the ``ray`` extra)."""
    from audiocpp.engine.ray_cluster import import_ray

    check_args(args)
    require_extra()
    import_ray("--ray and --ray-address", ("ray.serve",), "Ray Serve")


@dataclass
class Planned:
    """What start-up checked before binding a port: the voice store, the models' plans, and the keys,
    limits, access log and TLS files."""

    voices: object
    models: list  # (name, plan, session options) per model
    keys: object = None
    limits: object = None
    access_log: object = None
    arguments: list = field(default_factory=list)  # the ModelArg of each model, in the same order


def plan_security(args: ServeArgs, salt: bytes) -> tuple[object, object]:
    """The keys (flags, AUDIOCPP_API_KEYS, the keys file) and the limits, checked; refuses to listen
    beyond this machine without a key (secure by default)."""
    from .auth import ENV_VAR, KeyRing, env_entries, is_loopback, parse_entry
    from .limits import Limit, Limits

    static = [parse_entry(text, f"--api-key #{i}") for i, text in enumerate(args.api_keys, 1)]
    static += [parse_entry(text if text.startswith("admin:") else f"admin:{text}", f"--admin-key #{i}",
                           admin=True) for i, text in enumerate(args.admin_keys, 1)]
    env = args.env_keys if args.env_keys is not None else os.environ.get(ENV_VAR)
    static += env_entries(env)
    keys = KeyRing(salt, static, args.api_keys_file.expanduser() if args.api_keys_file else None)
    if keys.enabled and args.insecure_no_auth:
        raise UsageError("--insecure-no-auth serves without keys, and keys are given",
                         hint="drop --insecure-no-auth (or the keys)")
    if args.http and not keys.enabled and not args.insecure_no_auth and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} listens beyond this machine, and no API key is set: anyone who "
                         "reaches the port could synthesize, clone the stored voices and delete them",
                         hint="add --api-key KEY (or --api-keys-file FILE, or AUDIOCPP_API_KEYS), or "
                         "--insecure-no-auth to serve without keys on purpose (behind a proxy that checks)")
    rate = Limit.parse(args.rate_limit, "--rate-limit", "60/min", whole=True) if args.rate_limit else None
    audio = Limit.parse(args.audio_limit, "--audio-limit", "3600/day") if args.audio_limit else None
    return keys, Limits(rate, audio)


def tls_options(args: ServeArgs) -> dict[str, str]:
    """``--ssl-certfile`` / ``--ssl-keyfile`` as uvicorn's (and Ray Serve's HTTP proxy's) options."""
    if args.ssl_certfile is None or args.ssl_keyfile is None:
        return {}
    return {"ssl_certfile": str(Path(args.ssl_certfile).expanduser()),
            "ssl_keyfile": str(Path(args.ssl_keyfile).expanduser())}


def check_tls(args: ServeArgs) -> None:
    """The certificate and key load (a clear error before anything else, not uvicorn's traceback)."""
    if args.ssl_certfile is None or args.ssl_keyfile is None:
        return
    import ssl

    for flag, path in (("--ssl-certfile", args.ssl_certfile), ("--ssl-keyfile", args.ssl_keyfile)):
        if not Path(path).expanduser().is_file():
            raise UsageError(f"{flag} {str(path)!r} does not exist")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            str(Path(args.ssl_certfile).expanduser()), str(Path(args.ssl_keyfile).expanduser()))
    except (ssl.SSLError, OSError, ValueError) as error:
        raise UsageError(f"cannot use --ssl-certfile / --ssl-keyfile: {error}",
                         hint="give a PEM certificate (its chain after it) and the PEM private key that "
                         "matches it, without a passphrase") from None


def plan(args: ServeArgs, *, cluster: bool = False) -> Planned:
    """Flags, options, the voices folder and every model planned (names downloaded, families
    detected, options checked), nothing loaded: every usage error comes before the port is bound.
    ``cluster``: for Ray Serve, whose voice store and access log are the cluster's (none made here)."""
    import secrets

    from audiocpp.engine.spec.options import parse_key_values

    from .served_models import ModelArg, plan_models
    from .voices import VoiceStore

    check_args(args)
    session_options = parse_key_values(args.session_options, flag="--session-option")
    load_options = parse_key_values(args.load_options, flag="--load-option")
    voices_dir = args.voices_dir or default_voices_dir()
    try:
        voices = None if cluster else VoiceStore(voices_dir)
    except OSError as error:
        raise UsageError(f"cannot use --voices-dir {str(voices_dir)!r}: {error.strerror or error}") from None
    # the cluster's salt is its voice store's: the checks need none
    keys, limits = plan_security(args, secrets.token_bytes(32) if voices is None else voices.salt)
    check_tls(args)
    access_log = None
    if args.access_log is not None and not cluster:
        from .audit import AccessLog

        access_log = AccessLog(args.access_log, log_text=args.log_text)
    arguments = [ModelArg.parse(m) for m in args.models] or [ModelArg(None)]
    models = plan_models(arguments, args.family, session_options, load_options)
    return Planned(voices, models, keys, limits, access_log, arguments)


def effective_max_batch(args: ServeArgs, name: str, model) -> int:
    """One model's batch size: the family's on its device without ``--max-batch``; an explicit value
    above a size the family measured smaller than the generic one (OmniVoice on the CPU: 1; bigger
    batches there gain 0.99-1.10x for 4-8x each request's latency, docs/batching.md) capped to it with a
    notice, unless ``--max-batch-force``. A family at the generic size has measured no limit: as given."""
    from audiocpp.engine.device import device_of
    from audiocpp.engine.plugin import FamilyPlugin

    from .auth import say

    measured = model.default_max_batch()
    wanted = args.max_batch
    if wanted is None:
        return measured
    device = device_of(model.load_options).type
    if args.max_batch_force or wanted <= measured or measured >= FamilyPlugin.max_batch.get(device, 8):
        return wanted
    say(f"--max-batch {wanted} capped to {measured} for {name}: batching {model.family} on {device} does not "
        f"pay beyond {measured} (measured: docs/batching.md); add --max-batch-force to use {wanted}")
    return measured


def model_worker(args: ServeArgs, name: str, model, max_batch: int, metrics, keyed: bool):
    """One served model's ``ModelWorker`` from the serve flags, counting into ``metrics``: a single
    server's, and each Ray Serve replica's (``keyed``: the server has API keys, so each key gets its
    share of the queue)."""
    from .scheduler import ModelWorker
    from .speech import synthesize

    per_key = args.max_queue_per_key if args.max_queue_per_key is not None else (args.max_queue + 1) // 2
    return ModelWorker(name, model, args.max_concurrency or max_batch, args.max_queue,
                       max_batch=max_batch, window_s=args.batch_window_ms / 1000,
                       on_cancel=lambda: metrics.count_cancelled(name),
                       on_group=lambda size: metrics.observe_batch(name, size),
                       on_join=lambda waited: metrics.observe_join_wait(name, waited),
                       max_queue_per_key=per_key if keyed else None, synthesize=synthesize)


def build_state(args: ServeArgs, planned: Planned | None = None):
    """Load the planned models and make the server state (no socket yet)."""
    from .metrics import ServerMetrics
    from .request_log import RequestLog
    from .served_models import load_models
    from .state import ServerState

    planned = planned or plan(args)
    models = load_models(planned.models)
    metrics = ServerMetrics()
    batch = {name: effective_max_batch(args, name, served.model) for name, served in models.items()}
    keyed = planned.keys is not None and planned.keys.enabled
    workers = {name: model_worker(args, name, served.model, batch[name], metrics, keyed)
               for name, served in models.items()}
    extra = {"limits": planned.limits} if planned.limits is not None else {}
    return ServerState(models=models, workers=workers, voices=planned.voices, metrics=metrics,
                       max_input_chars=args.max_input_chars, max_body_bytes=int(args.max_body_mb * (1 << 20)),
                       wyoming_seed=args.wyoming_seed, keys=planned.keys, access_log=planned.access_log,
                       request_log=None if args.quiet else RequestLog(),
                       metrics_public=args.metrics_public, max_voices_per_key=args.max_voices_per_key,
                       side_pool=True, **extra)


def install_signals(handlers: dict) -> dict:
    """Install ``handlers`` (signal -> handler); returns the handlers they replaced, which
    ``install_signals(previous)`` puts back (a local server's SIGHUP, ``serve --ray``'s signals)."""
    import signal

    return {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}


def serve(args: ServeArgs) -> None:
    import contextlib
    import signal

    from .auth import is_loopback, say

    if on_ray(args):
        raise UsageError("--ray and --ray-address are served by audiocpp.server.ray_serve.serve_on_ray",
                         hint="call check_ray(args) and then ray_serve.serve_on_ray(args)")
    require_extra()
    planned = plan(args)  # every flag, option and model checked before a port is bound
    state = None

    def on_sighup(signum: int, frame: object) -> None:  # the keys file and the access log, again
        if state is not None:
            state.request_reload()

    with contextlib.ExitStack() as stack:
        previous = install_signals({signal.SIGHUP: on_sighup} if hasattr(signal, "SIGHUP") else {})
        stack.callback(install_signals, previous)
        sock = stack.enter_context(listen(args.host, args.port)) if args.http else None
        wyoming_host = args.wyoming_host or "127.0.0.1"
        wyoming_sock = None
        if args.wyoming_port is not None:
            wyoming_sock = stack.enter_context(listen(wyoming_host, args.wyoming_port, flag="--wyoming-port"))
            if not is_loopback(wyoming_host):
                say(f"warning: Wyoming listens on {wyoming_host}, beyond this machine, and Wyoming has no "
                    "authentication: anyone who reaches its port can synthesize with the served models and "
                    "the shared voices; let only Home Assistant reach it (a firewall, a private network)")
        state = build_state(args, planned)
        names = ", ".join(f"{n} ({m.family}, {m.model.sample_rate} Hz)" for n, m in state.models.items())
        say(f"{names}; voices in {state.voices.folder}")
        if state.keys is not None and state.keys.enabled:
            say(f"API keys: {state.keys.describe()}" + (f" (keys file {args.api_keys_file}, reloaded on "
                                                         "SIGHUP)" if args.api_keys_file else ""))
        if state.access_log is not None:
            stack.callback(state.access_log.close)
        stack.callback(state.shutdown)
        if sock is not None:
            _run_http(args, state, sock, wyoming_sock)
        else:
            _run_wyoming(state, wyoming_sock)


def _announce_wyoming(sock: socket.socket, state) -> None:
    """Where Wyoming listens, and how Home Assistant reaches every model: through the voices of the
    one text-to-speech service it sees."""
    host, port = sock.getsockname()[:2]
    models = ", ".join(state.models)
    named = sum(len(served.named_voices()) for served in state.models.values())
    voices = f" and {named} named voice{'s' if named != 1 else ''}" if named else ""
    how = (f"its voice 'default'{voices}" if len(state.models) == 1
           else f"a voice per model ({models}; MODEL/VOICE for named and stored voices){voices}")
    print(f"audiocpp serve: Wyoming on tcp://{host}:{port}: Home Assistant sees one text-to-speech service, "
          f"audiocpp, with {how}", file=sys.stderr)


def _run_http(args: ServeArgs, state, sock: socket.socket, wyoming_sock: socket.socket | None) -> None:
    import uvicorn

    from .app import create_app
    from .auth import install_redaction

    app = create_app(state, wyoming_socket=wyoming_sock)
    tls = tls_options(args)
    # h11 and asyncio whatever else is installed (Ray Serve's extra brings uvicorn[standard]: httptools,
    # uvloop): the parser's limits and answers are the ones the server's tests and docs describe
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, http="h11",
                            loop="asyncio", timeout_graceful_shutdown=args.drain_s,
                            access_log=args.log_level in ("info", "debug", "trace"), **tls)
    install_redaction(state.keys)  # uvicorn's own lines show paths with their query (?api_key=)
    server = uvicorn.Server(config)
    host, port = sock.getsockname()[:2]
    scheme = "https" if tls else "http"
    print(f"audiocpp serve: listening on {scheme}://{host}:{port} (playground at /)", file=sys.stderr)
    if wyoming_sock is not None:
        _announce_wyoming(wyoming_sock, state)
    server.run(sockets=[sock])


def _run_wyoming(state, sock: socket.socket) -> None:
    """Wyoming alone (``--no-http``), until SIGINT / SIGTERM."""
    import asyncio
    import signal

    from . import wyoming

    async def main() -> None:
        state.loop = asyncio.get_running_loop()
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
