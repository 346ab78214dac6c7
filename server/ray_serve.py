"""``audiocpp serve --ray``: the same server as a Ray Serve application (docs/server.md, "On a Ray cluster").

The application has an **ingress** deployment and one deployment per ``--model``:

- The ingress runs the FastAPI app of a single-machine server (``app.create_app``: the same routes, the
  gate with its keys, limits and access log, the error shapes), over a :class:`~app.ServerState` whose
  models describe the remote ones (:class:`RemoteServedModel`), whose workers are :class:`RemoteWorker`
  (each request goes to the model's deployment through a Ray Serve handle, which routes it to a replica)
  and whose voice store is the cluster's (:class:`ClusterVoices`). It plans each request as a single
  server does, then hands the planned request (:func:`sent_plan`) on.
- A model replica (:class:`ModelReplica`) loads its model once and runs the model's executor through a
  :class:`~scheduler.ModelWorker` (rows join mid-generation, which ``@serve.batch`` cannot), synthesizes
  and encodes with ``speech.synthesize`` as a single server does, and streams the outcome back.
- The voices live in one named, detached Ray actor (:class:`VoiceStoreActor`) pinned to the head node,
  over a :class:`~voices.VoiceStore` in that node's ``--voices-dir``: every replica on every node reaches
  it without a shared filesystem, it survives replicas' restarts, and it is restarted by Ray (from the
  same folder) if it dies.

The config file (``--print-config``) names :func:`app_builder`, which builds the same application from
the serve flags, for ``serve run`` / ``serve deploy`` / a KubeRay ``RayService``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError, TaskCancelledError
from ray.serve.exceptions import (
    BackPressureError,
    DeploymentUnavailableError,
    ReplicaUnavailableError,
    RequestCancelledError,
)

from audiocpp.engine.errors import AudiocppError, UsageError
from audiocpp.engine.hashing import file_sha256
from audiocpp.engine.ray_cluster import ModelActor
from audiocpp.engine.records import AudioBuffer, TaskResult, VoiceReference

from .auth import ENV_VAR, say
from .cli import Planned, ServeArgs, install_signals, model_worker, parse_autoscale, plan, plan_security
from .errors import ApiError, Busy
from .metrics import Series, ServerMetrics
from .scheduler import Cancelled, Job, as_asyncio
from .served_models import ServedModel
from .service import api_error, job_items
from .speech import SpeechPlan
from .voices import REFERENCE_RE, StoredVoice, VoiceStore, write_private

APP_NAME = "audiocpp"
NAMESPACE = "audiocpp"
INGRESS = "ingress"
STORE = f"{APP_NAME}-voices"  # the cluster's voice store: a named, detached actor
IMPORT_PATH = "audiocpp.server.ray_serve:app_builder"
#: How a replica whose model did not load says why (one line of JSON after it, in Ray's status message).
LOAD_FAILURE = "audiocpp-load-failure: "
#: Retry-After (seconds) of a request whose replica died: Ray Serve has a replica ready again by then or
#: routes the retry to another one.
RETRY_AFTER_DEAD_S = 2
#: The serve flags that are the HTTP proxy's (cluster-wide, in http_options) or the command line's.
_PROXY_FIELDS = ("host", "port", "ssl_certfile", "ssl_keyfile", "log_level")
_CLI_FIELDS = ("ray", "ray_address", "print_config", "http", "wyoming_port", "wyoming_seed", "wyoming_host")
_PATH_FIELDS = ("voices_dir", "api_keys_file")
_PROMPT_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}\.prompt$")


def deployment_name(model: str) -> str:
    return f"model-{model}"


# -- the flags as the builder's arguments -----------------------------------------------------------------
def builder_args(args: ServeArgs, *, env_keys: bool = True) -> dict[str, Any]:
    """The serve flags the application reads, as the JSON-able ``args`` of :func:`app_builder` (only those
    that differ from the defaults). ``env_keys``: carry this process's AUDIOCPP_API_KEYS (the command
    line does; a config file does not: the ingress then reads its own environment)."""
    out: dict[str, Any] = {}
    defaults = ServeArgs()
    for f in dataclasses.fields(ServeArgs):
        value = getattr(args, f.name)
        if f.name in _PROXY_FIELDS + _CLI_FIELDS + ("env_keys",) or value == getattr(defaults, f.name):
            continue
        out[f.name] = str(value) if isinstance(value, Path) else value
    if env_keys and os.environ.get(ENV_VAR):
        out["env_keys"] = os.environ[ENV_VAR]
    return out


def args_from(config: dict[str, Any]) -> ServeArgs:
    """:func:`builder_args`' dictionary back as ServeArgs (a key that is no serve flag is an error)."""
    names = {f.name for f in dataclasses.fields(ServeArgs)} - set(_CLI_FIELDS) - set(_PROXY_FIELDS)
    unknown = sorted(set(config) - names)
    if unknown:
        raise UsageError(f"the audiocpp application's args have unknown keys: {', '.join(unknown)}",
                         hint=f"its keys are the serve flags with '_' for '-': {', '.join(sorted(names))}")
    values = {k: Path(v) if k in _PATH_FIELDS and v is not None else v for k, v in config.items()}
    return ServeArgs(**values, ray=True)  # the application runs on Ray Serve, whoever deploys it


def _device_type(load_options: dict[str, Any], num_gpus: float) -> str:
    device = str(load_options.get("device") or os.environ.get("AUDIOCPP_DEVICE") or "cpu")
    if device == "auto":
        return "cuda" if num_gpus > 0 else "cpu"
    return device.partition(":")[0]


def model_options(args: ServeArgs, name: str, plan: Any) -> dict[str, Any]:
    """The Ray Serve options of one model's deployment: replicas or autoscaling, resources, and a
    request limit per replica equal to its admission capacity (beyond it Ray Serve queues up to
    ``--max-queue`` more at the ingress, then the ingress answers 429)."""
    device = _device_type(plan.load_options, args.num_gpus)
    max_batch = args.max_batch or plan.plugin.default_max_batch(device)
    capacity = (args.max_concurrency or max_batch) + args.max_queue
    options: dict[str, Any] = {
        "name": deployment_name(name),
        "max_ongoing_requests": capacity,
        "max_queued_requests": max(1, args.max_queue),
        "ray_actor_options": {"num_cpus": 1.0 if args.num_cpus is None else args.num_cpus,
                              "num_gpus": args.num_gpus},
        "max_constructor_retry_count": 1,  # a model that does not load fails the deployment once
        **_lifecycle(args),
    }
    if args.autoscale:
        low, high = parse_autoscale(args.autoscale)
        options["autoscaling_config"] = {"min_replicas": low, "max_replicas": high, "initial_replicas": low,
                                         "target_ongoing_requests": max_batch}
    else:
        options["num_replicas"] = args.replicas or 1
    return options


def ingress_options(args: ServeArgs) -> dict[str, Any]:
    """One ingress replica: no CPU of its own (it plans and forwards; the replicas synthesize and encode),
    and no limit of its own on requests in progress (each model's capacity limits them)."""
    return {"name": INGRESS, "num_replicas": 1, "max_ongoing_requests": 4096,
            "ray_actor_options": {"num_cpus": 0}, **_lifecycle(args)}


def _lifecycle(args: ServeArgs) -> dict[str, Any]:
    """Every deployment's drain (``--drain-s``) and health checks."""
    return {"graceful_shutdown_timeout_s": max(1.0, args.drain_s), "graceful_shutdown_wait_loop_s": 0.5,
            "health_check_period_s": 2.0, "health_check_timeout_s": 30.0}


def app_builder(config: dict) -> Any:
    """The application from the serve flags (:func:`builder_args`): what ``--print-config``'s
    ``import_path`` names, so that ``serve run`` / ``serve deploy`` build the same app as ``--ray``."""
    args = args_from(dict(config or {}))
    planned = plan(args, cluster=True)
    keyed = planned.keys.enabled  # type: ignore[attr-defined]  # as a single server's (cli.build_state)
    models = {}
    for arg, (name, plan_, sess) in zip(planned.arguments, planned.models):
        info = {"name": name, "model": arg.model, "family": plan_.family, "session_options": dict(sess),
                "load_options": dict(plan_.load_options), "demo": plan_.demo, "keyed": keyed}
        models[name] = ModelDeployment.options(**model_options(args, name, plan_)).bind(config, info)
    return Ingress.options(**ingress_options(args)).bind(config, models)


# -- the cluster's voice store --------------------------------------------------------------------------
def _error_tuple(error: ApiError) -> tuple:
    return ("error", error.status, error.message, error.param, error.code, dict(error.headers))


def _raise_error(item: tuple) -> None:
    _, status, message, param, code, headers = item
    raise ApiError(status, message, param=param, code=code, headers=headers)


class _PromptBytes:
    """A prepared voice prompt as the bytes of its file (``VoiceStore.save_prompt`` calls ``save``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        write_private(tmp, self.data)
        os.replace(tmp, path)


@dataclasses.dataclass
class RemoteVoice(StoredVoice):
    """A voice of the cluster's store with its reference's content hash. At the ingress ``folder`` and
    ``reference`` name it (they are no files there); on a replica, its copy (:meth:`ClusterVoices.local`)."""

    digest: str = ""


class VoiceStoreActor:
    """The voices of the whole cluster: a ``VoiceStore`` in the head node's voices folder, behind one
    actor. :meth:`call` runs one of the store's own methods (``METHODS``) and hands its voices back as
    :class:`RemoteVoice` (with their content hash); :meth:`file` and :meth:`save_prompt` are the replicas'
    copying. Errors a client caused come back as tuples (``_error_tuple``), not exceptions."""

    #: The store's methods the ingress calls through :class:`ClusterVoices`.
    METHODS = ("get", "list", "owners", "add", "delete")

    def __init__(self, folder: str | None) -> None:
        from .cli import default_voices_dir

        self.store = VoiceStore(Path(folder).expanduser() if folder else default_voices_dir())
        self._digests: dict[tuple[str, int, int], str] = {}

    def ping(self) -> tuple[str, bytes]:
        return str(self.store.folder), self.store.salt

    def call(self, method: str, *args: Any) -> Any:
        if method not in self.METHODS:
            raise AttributeError(f"the voice store has no remote method {method!r}")
        try:
            return self._out(getattr(self.store, method)(*args))
        except ApiError as error:
            return _error_tuple(error)

    def _out(self, value: Any) -> Any:
        """A store's answer as it crosses the cluster: each voice as a RemoteVoice, named by where it is in
        the store and carrying its content hash (None if deleted meanwhile: left out of a list)."""
        if isinstance(value, list):
            return [v for v in map(self._out, value) if v is not None]
        if not isinstance(value, StoredVoice):
            return value
        digest = self._digest(value)
        if digest is None:
            return None
        folder = Path("/cluster-voices") / (f"@{value.owner}" if value.owner else "") / value.name
        return RemoteVoice(**{**vars(value), "folder": folder, "reference": folder / value.reference.name},
                           digest=digest)

    def _digest(self, voice: StoredVoice) -> str | None:
        try:
            st = voice.reference.stat()
            key = (str(voice.reference), st.st_mtime_ns, st.st_size)
            if key not in self._digests:
                self._digests[key] = file_sha256(voice.reference)
            return self._digests[key]
        except OSError:  # deleted meanwhile
            return None

    def _current(self, name: str, owner: str | None, digest: str, filename: str | None) -> Any:
        """The stored voice, if it still is the one with this content hash (and ``filename``, unless
        None, names a prompt)."""
        voice = self.store.get(name, owner)
        if voice is None or (filename is not None and not _PROMPT_NAME.match(filename)):
            return None
        return voice if self._digest(voice) == digest else None

    def file(self, name: str, owner: str | None, digest: str, filename: str | None = None) -> bytes | None:
        """A voice's reference audio (``filename`` None) or its prompt ``filename``, if the voice still is
        the one with this content hash."""
        voice = self._current(name, owner, digest, filename)
        if voice is None:
            return None
        try:
            path = voice.reference if filename is None else voice.folder / "prompts" / filename
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def save_prompt(self, name: str, owner: str | None, digest: str, filename: str, data: bytes) -> None:
        voice = self._current(name, owner, digest, filename)
        if voice is not None:
            self.store.save_prompt(voice, voice.folder / "prompts" / filename, _PromptBytes(data))


def voice_store_actor(voices_dir: Path | None) -> Any:
    """The cluster's voice store (made by whoever asks first): detached, restarted by Ray when it dies
    (from the same folder: it is pinned to the head node), no CPU of its own."""
    remote = ray.remote(VoiceStoreActor)
    return remote.options(name=STORE, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                          max_restarts=-1, max_task_retries=3, num_cpus=0,
                          resources={"node:__internal_head__": 0.001}).remote(
        str(voices_dir) if voices_dir is not None else None)


class ClusterVoices:
    """``VoiceStore``'s interface over the cluster's store (blocking calls: from worker threads): the
    store's methods (``VoiceStoreActor.METHODS``) are forwarded, a client's error raised as here. A model
    replica (``cache``: a folder of its own) also keeps copies of the voices it uses, made on first use
    (``<cache>/<digest>/reference.<ext>`` and ``prompts/``), and pushes the prompts it prepares back."""

    TIMEOUT_S = 60

    def __init__(self, actor: Any, cache: Path | None = None) -> None:
        self.actor = actor
        self.cache = cache
        location, self.salt = ray.get(actor.ping.remote(), timeout=self.TIMEOUT_S)
        self.folder = Path(location)

    def _call(self, method: str, *args: Any) -> Any:
        result = ray.get(getattr(self.actor, method).remote(*args), timeout=self.TIMEOUT_S)
        if isinstance(result, tuple) and result and result[0] == "error":
            _raise_error(result)
        return result

    def __getattr__(self, method: str) -> Any:
        if method not in VoiceStoreActor.METHODS:
            raise AttributeError(method)
        return lambda *args: self._call("call", method, *args)

    def local(self, voice: RemoteVoice) -> RemoteVoice:
        """A voice of the store as this replica's copy of it (fetched on first use)."""
        if (self.cache is None or not re.fullmatch(r"[0-9a-f]{64}", voice.digest)
                or not REFERENCE_RE.match(voice.reference.name)):
            raise ApiError(500, "the voice store sent a voice this replica cannot use", code="internal_error")
        folder = self.cache / voice.digest
        reference = folder / voice.reference.name
        if not reference.is_file():
            data = self._call("file", voice.name, voice.owner, voice.digest)
            if data is None:
                raise ApiError(409, f"voice {voice.name!r} changed or was deleted while this request was "
                               "queued; send it again", param="voice", code="voice_changed")
            (folder / "prompts").mkdir(parents=True, exist_ok=True, mode=0o700)
            _PromptBytes(data).save(reference)
        return dataclasses.replace(voice, folder=folder, reference=reference)

    def prompt(self, voice: RemoteVoice, path: Path) -> Path | None:
        """A voice prompt (``path`` in a voice of :meth:`local`): this replica's copy, else the store's,
        else None."""
        if path.is_file():
            return path
        data = self._call("file", voice.name, voice.owner, voice.digest, path.name)
        if data is None:
            return None
        _PromptBytes(data).save(path)
        return path

    def save_prompt(self, voice: StoredVoice, path: Path, prompt: Any) -> None:
        """Called by ``speech.synthesize`` on a replica after a synthesis that prepared the voice's prompt."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        prompt.save(path)
        if isinstance(voice, RemoteVoice) and path.is_file():
            self._call("save_prompt", voice.name, voice.owner, voice.digest, path.name, path.read_bytes())


# -- one request, from the ingress to a replica ------------------------------------------------------------
def sent_plan(plan: SpeechPlan) -> SpeechPlan:
    """A request planned at the ingress as it goes to a replica: the same plan without the ingress's
    model (the replica puts its own) and accounting; a stored voice goes as its name and content hash
    (the replica attaches its own copy of it, or of its prompt)."""
    request = dataclasses.replace(plan.request, options=dict(plan.request.options))
    if plan.voice is not None:
        request.voice = None
        request.voice_prompt = None
    voice = plan.voice if isinstance(plan.voice, RemoteVoice) else None
    return dataclasses.replace(plan, served=None, account=None, request=request, voice=voice)  # type: ignore[arg-type]


def _error_item(error: BaseException) -> tuple:
    """A replica's failure as the ingress reports it: the mapping of a single server (``api_error``)."""
    return ("cancelled",) if isinstance(error, Cancelled) else _error_tuple(api_error(error))


def _light(result: TaskResult, keep_audio: bool) -> TaskResult:
    """The result without what the ingress does not use (the audio, unless asked: it has the bytes)."""
    empty = AudioBuffer(np.zeros(0, dtype=np.float32), result.audio.sample_rate)
    audio = result.audio if keep_audio else empty
    return dataclasses.replace(result, audio=audio, chunks=[], voice_prompt=None, details={})


class ModelLoadFailed(RuntimeError):
    """A replica whose model did not load: the engine's message, as one line Ray's status carries."""

    def __init__(self, name: str, error: BaseException | None) -> None:
        if not isinstance(error, AudiocppError):
            error = AudiocppError(f"{type(error).__name__}: {error}")
        detail = {"model": name, "message": error.message, "hint": error.hint}
        super().__init__(LOAD_FAILURE + json.dumps(detail))


class ModelReplica(ModelActor):
    """One replica of a model's deployment: the model loaded once (``ModelActor``, the body of
    ``batch --ray``'s actors too), its executor behind a ModelWorker as on a single server."""

    def __init__(self, config: dict[str, Any], info: dict[str, Any]) -> None:
        args = args_from(dict(config or {}))
        # planned and loaded as ``audiocpp serve`` loads it (the ingress routed the options)
        super().__init__(info["model"], info["family"], info["load_options"], default_demo=True)
        self.name = info["name"]
        if self.failure is not None or self.model is None:  # the deployment fails once, with the message
            raise ModelLoadFailed(self.name, self.failure) from None
        self.served = ServedModel(self.name, self.model, dict(info["session_options"]), demo=self.demo)
        self.served.make_checker()
        try:
            self.replica = serve.get_replica_context().replica_id.unique_id
        except Exception:  # noqa: BLE001 - outside Ray Serve (a test constructing it directly)
            self.replica = f"local-{os.getpid()}"
        self.node = self.node_id()
        self.metrics = ServerMetrics()
        model = self.served.model
        self.worker = model_worker(args, self.name, model, args.max_batch or model.default_max_batch(),
                                   self.metrics, bool(info.get("keyed")))
        self.cache = Path(tempfile.mkdtemp(prefix="audiocpp-voices-"))
        self.voices = ClusterVoices(voice_store_actor(args.voices_dir), self.cache)
        self.served_count = 0

    def describe(self) -> dict[str, Any]:
        """This replica's model as the ingress serves it, and its worker's sizes."""
        return {"served": RemoteServedModel.of(self.served), "max_batch": self.worker.max_batch,
                "capacity": self.worker.capacity, "replica": self.replica}

    def ask(self, method: str, *args: Any) -> tuple[str, Any, Any]:
        """One of the served model's own checks (``RemoteServedModel.ASKED``: a language as a single server
        checks it, ``/dev/phonemize``'s text front end): ("ok", answer, None) or ("error", message, hint)."""
        if method not in RemoteServedModel.ASKED:
            raise AttributeError(f"a replica answers no {method!r}")
        try:
            return "ok", getattr(self.served, method)(*args), None
        except AudiocppError as error:
            return "error", error.message, error.hint

    def report(self) -> dict[str, Any]:
        """This replica's figures, for the ingress's /metrics and /health."""
        return {"replica": self.replica, "model": self.name, "node": self.node,
                "metrics": self.metrics.snapshot(), "queued": self.worker.queued,
                "synthesizing": self.worker.synthesizing, "capacity": self.worker.capacity,
                "served": self.served_count}

    def _plan(self, sent: SpeechPlan) -> SpeechPlan:
        """The ingress's plan (:func:`sent_plan`) on this replica's model, with its copy of the voice."""
        request = dataclasses.replace(sent.request, options=dict(sent.request.options))
        voice = self.voices.local(sent.voice) if isinstance(sent.voice, RemoteVoice) else None
        if voice is not None:
            prompt = None
            if not sent.reference_given:
                prompt = self.voices.prompt(voice, voice.prompt_path(self.served.key, sent.prompt_options))
            if prompt is not None:
                request.voice, request.voice_prompt, request.reference_text = None, prompt, None
            else:
                request.voice = VoiceReference(path=voice.reference)
        return dataclasses.replace(sent, served=self.served, request=request, voice=voice)

    async def speak(self, call: SpeechPlan, keep_audio: bool = False):
        """``("admitted", replica)``, the audio pieces ``("audio", bytes, samples, words)``, then
        ``("done", result, bytes)``; or ``("error", status, message, param, code, headers)``."""
        job = Job(asyncio.get_running_loop())
        try:
            plan = await asyncio.to_thread(self._plan, call)
            future = as_asyncio(self.worker.submit_speech(plan, job, self.voices))
        except BaseException as error:  # noqa: BLE001 - told to the ingress (a full queue: its 429)
            yield _error_item(error)
            return
        yield ("admitted", self.replica)
        try:
            async with contextlib.aclosing(job_items(job, future)) as items:
                async for item in items:
                    yield item
            try:
                result, data = future.result()
            except BaseException as error:  # noqa: BLE001 - told to the ingress
                yield _error_item(error)
                return
            self.served_count += 1
            yield ("done", _light(result, keep_audio), data)
        finally:  # also when the ingress cancelled the call (its client went away): only this row stops
            if not future.done():
                job.cancel()

    def __del__(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.shutdown()
        cache = getattr(self, "cache", None)
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)


# -- the ingress -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class RemoteServedModel(ServedModel):
    """A served model whose weights are on the replicas: the ingress plans requests with what a replica
    described (:meth:`of`); languages are checked, and text phonemized, by one of them."""

    #: What a replica answers for the ingress (ModelReplica.ask), its model's own checks.
    ASKED = ("check_language", "phonemize")

    handle: Any = None

    @classmethod
    def of(cls, served: ServedModel) -> RemoteServedModel:
        """A replica's served model for the ingress (``describe()``): its model's spec, rate, path,
        options and default voices stand for the model."""
        model = served.model
        stand_in = SimpleNamespace(spec=model.spec, family=model.family, sample_rate=model.sample_rate,
                                   path=model.path, load_options=dict(model.load_options),
                                   default_voice=served.default_voices().get)
        return cls(served.name, stand_in, dict(served.session_options), demo=served.demo,  # type: ignore[arg-type]
                   _named=list(served.named_voices()))

    def make_checker(self) -> None:
        return None

    def _ask(self, method: str, *args: Any) -> Any:
        """A replica's answer to one of ``ASKED``; the engine's UsageError it raised, raised here."""
        status, found, hint = self.handle.ask.remote(method, *args).result(timeout_s=60)
        if status != "ok":
            raise UsageError(found, hint=hint)
        return found

    def check_language(self, language: str) -> None:
        self._ask("check_language", language)

    def phonemize(self, text: str, language: str | None) -> dict[str, Any]:
        return self._ask("phonemize", text, language)


#: What a replica that died raises at the ingress.
_REPLICA_GONE = (RayActorError, ActorUnavailableError, ReplicaUnavailableError)


class RemoteWorker:
    """A model's deployment as the app's worker: each request goes to a replica through the handle.

    A request whose replica died before it streamed anything (not yet admitted there, queued there, or
    synthesizing without a piece sent) is sent again (Ray Serve routes it to a live replica; up to
    ``RESUBMITS`` times): nothing of it reached the client, and the same plan gives the same audio. One that
    had started streaming ends with a 503 and ``Retry-After`` (its error event, or its connection closed),
    never a hang."""

    #: How many times a request whose replica died before its first piece is sent again.
    RESUBMITS = 3

    def __init__(self, name: str, handle: Any, info: dict[str, Any]) -> None:
        self.name = name
        self.handle = handle
        self.streaming = handle.options(stream=True)
        self.max_batch = int(info["max_batch"])
        self.replica_capacity = int(info["capacity"])
        self.routing = 0  # requests handed to Ray Serve that no replica has admitted yet
        self.in_flight = 0
        self.resubmitted = 0  # requests sent again because their replica died before their first piece
        self.draining = False
        self.reports: dict[str, dict[str, Any]] = {}  # the live replicas' last reports

    @property
    def queued(self) -> int:
        return self.routing + sum(int(r["queued"]) for r in self.reports.values())

    @property
    def synthesizing(self) -> int:
        return sum(int(r["synthesizing"]) for r in self.reports.values())

    @property
    def capacity(self) -> int:
        return self.replica_capacity * max(1, len(self.reports))

    def submit_speech(self, plan: SpeechPlan, job: Job, voices: Any, *, keep_audio: bool = False) -> Future:
        if self.draining:
            raise ApiError(503, "the server is shutting down; retry on another server", code="shutting_down",
                           headers={"Retry-After": str(RETRY_AFTER_DEAD_S)})
        future: Future = Future()
        future.set_running_or_notify_cancel()
        task = asyncio.get_running_loop().create_task(self._run(sent_plan(plan), keep_audio, job, future))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return future

    async def _run(self, call: SpeechPlan, keep_audio: bool, job: Job, future: Future) -> None:
        self.in_flight += 1
        try:
            future.set_result(await self._stream(call, keep_audio, job))
        except BaseException as error:  # noqa: BLE001 - every outcome ends the request's future
            future.set_exception(self._failure(error, job))
            if isinstance(error, asyncio.CancelledError) and not job.cancelled.is_set():
                raise
        finally:
            self.in_flight -= 1

    async def _stream(self, call: SpeechPlan, keep_audio: bool, job: Job) -> tuple[TaskResult, bytes]:
        """The request on a replica: its pieces emitted, its (result, bytes) returned; sent again while
        its replica dies before its first piece."""
        streamed = False
        for attempt in range(self.RESUBMITS + 1):
            admitted = False
            self.routing += 1
            response = self.streaming.speak.remote(call, keep_audio)
            job.attach(response)  # a client that goes away cancels the call (its row on the replica)
            try:
                async for item in response:
                    if item[0] == "admitted":
                        admitted = True
                        self.routing -= 1
                        job.headers["x-audiocpp-replica"] = str(item[1])
                    elif item[0] == "audio":
                        streamed = True
                        job.emit(item)
                    elif item[0] == "done":
                        return item[1], item[2]
                    elif item[0] == "cancelled":
                        raise Cancelled("the client went away")
                    else:
                        _raise_error(item)
                raise ApiError(500, "internal error: the replica's stream ended without a result",
                               code="internal_error")
            except _REPLICA_GONE:
                if streamed or attempt == self.RESUBMITS:
                    raise
                self.resubmitted += 1  # nothing reached the client: a live replica runs it again
            finally:
                if not admitted:
                    self.routing -= 1
        raise AssertionError("unreachable")

    def _failure(self, error: BaseException, job: Job) -> BaseException:
        stopped = (RequestCancelledError, TaskCancelledError, asyncio.CancelledError)
        if job.cancelled.is_set() and isinstance(error, stopped):
            return Cancelled("the client went away")
        if isinstance(error, asyncio.CancelledError):
            return Cancelled("stopped")
        if isinstance(error, (ApiError, Cancelled)):
            return error
        if isinstance(error, _REPLICA_GONE):
            return ApiError(503, f"the replica of model {self.name!r} serving this request stopped (Ray "
                            f"Serve restarts it); retry in {RETRY_AFTER_DEAD_S} s",
                            code="replica_unavailable", headers={"Retry-After": str(RETRY_AFTER_DEAD_S)})
        if isinstance(error, BackPressureError):
            return Busy(self.name, RETRY_AFTER_DEAD_S)
        if isinstance(error, DeploymentUnavailableError):
            return ApiError(503, f"model {self.name!r} has no replica that can serve (its deployment failed)",
                            code="model_unavailable", headers={"Retry-After": str(10)})
        return error

    def shutdown(self) -> None:
        self.draining = True


class ClusterMetrics(ServerMetrics):
    """The ingress's own figures plus its replicas': one scrape sums every replica's counters and
    histograms (a replica that is gone keeps its last counts, so sums never go down), and adds per-replica
    series (``replica`` label) and Ray Serve's replica count and queue length per model."""

    def __init__(self, workers: dict[str, RemoteWorker]) -> None:
        super().__init__()
        self.workers = workers
        self.seen: dict[tuple[str, str], dict[str, Any]] = {}  # every replica's last report
        self.ray_states: dict[str, dict[str, int]] = {}

    async def refresh(self) -> None:
        for name, worker in self.workers.items():
            try:
                results = await worker.handle.broadcast("report").results_async(timeout_s=10,
                                                                                return_exceptions=True)
            except Exception:  # noqa: BLE001 - a broadcast that failed as a whole: the last reports stay
                continue
            worker.reports = {report["replica"]: report for report in results if isinstance(report, dict)}
            self.seen.update({(name, replica): report for replica, report in worker.reports.items()})
        try:
            app = (await asyncio.to_thread(serve.status)).applications.get(APP_NAME)
            deployments = app.deployments if app is not None else {}
            states = {name: getattr(deployments.get(deployment_name(name)), "replica_states", {})
                      for name in self.workers}
            self.ray_states = {name: {str(getattr(k, "value", k)): int(v) for k, v in replicas.items()}
                               for name, replicas in states.items()}
        except Exception:  # noqa: BLE001 - the controller did not answer: the counts are left out
            self.ray_states = {}

    def render(self) -> str:
        total = ServerMetrics()
        total.started = self.started
        total.merge(self.snapshot())
        for report in self.seen.values():
            total.merge(report["metrics"])
        total.gauges = self.gauges
        return total.render(self._replica_series())

    def _replica_series(self) -> list[Series]:
        ordered = sorted(self.seen.items())
        live = [(m, r, rep) for (m, r), rep in ordered if r in self.workers[m].reports]
        workers = sorted(self.workers.items())
        return [
            ("audiocpp_replica_syntheses_total", "counter", "Syntheses each Ray Serve replica completed.",
             [({"model": m, "replica": r}, rep["served"]) for (m, r), rep in ordered]),
            ("audiocpp_replica_queue_depth", "gauge", "Requests a replica admitted, waiting to synthesize "
             "(node: the Ray node it runs on).",
             [({"model": m, "replica": r, "node": rep["node"]}, rep["queued"]) for m, r, rep in live]),
            ("audiocpp_replica_synthesizing", "gauge", "Requests a replica synthesizes now.",
             [({"model": m, "replica": r}, rep["synthesizing"]) for m, r, rep in live]),
            ("audiocpp_ray_replicas", "gauge", "Ray Serve's replicas of each model's deployment, by state.",
             [({"model": m, "state": s}, n) for m, states in sorted(self.ray_states.items())
              for s, n in sorted(states.items())]),
            ("audiocpp_ray_queue_length", "gauge", "Requests this ingress handed to Ray Serve that no "
             "replica has taken yet (its router's queue).", [({"model": m}, w.routing) for m, w in workers]),
            ("audiocpp_ray_resubmitted_total", "counter", "Requests sent to another replica because theirs "
             "died before their first audio piece.", [({"model": m}, w.resubmitted) for m, w in workers]),
        ]


@serve.ingress()
class IngressApp:
    """The ingress deployment: the single-machine app over the cluster's models and voices."""

    async def __init__(self, config: dict[str, Any], models: dict[str, Any]) -> None:
        from .state import ServerState

        args = args_from(dict(config or {}))
        store = await asyncio.to_thread(ClusterVoices, voice_store_actor(args.voices_dir))
        keys, limits = plan_security(args, store.salt)
        access_log = None
        if args.access_log is not None:
            from .audit import AccessLog

            access_log = AccessLog(args.access_log, log_text=args.log_text)
        served: dict[str, ServedModel] = {}
        workers: dict[str, RemoteWorker] = {}
        for name, handle in models.items():
            info = await handle.describe.remote()
            served[name] = dataclasses.replace(info["served"], handle=handle)
            workers[name] = RemoteWorker(name, handle, info)
        self.state = ServerState(models=served, workers=workers, voices=store,  # type: ignore[arg-type]
                                 metrics=ClusterMetrics(workers), max_input_chars=args.max_input_chars,
                                 max_body_bytes=int(args.max_body_mb * (1 << 20)), keys=keys, limits=limits,
                                 access_log=access_log, metrics_public=args.metrics_public,
                                 max_voices_per_key=args.max_voices_per_key, plan_in_thread=True)

    def __serve_build_asgi_app__(self) -> Any:
        from .app import create_app

        return create_app(self.state)

    def reload(self) -> None:
        """SIGHUP of ``audiocpp serve --ray``: the keys file read again, the access log reopened."""
        self.state.request_reload()

    def drain(self) -> int:
        """Stop taking syntheses (503 with Retry-After); returns the requests still in progress."""
        self.state.shutdown()
        return sum(w.in_flight for w in self.state.workers.values())  # type: ignore[attr-defined]

    def __del__(self) -> None:
        state = getattr(self, "state", None)
        if state is not None and state.access_log is not None:
            state.access_log.close()


Ingress = serve.deployment(IngressApp)
ModelDeployment = serve.deployment(ModelReplica)


# -- the command line --------------------------------------------------------------------------------------
def http_options(args: ServeArgs) -> dict[str, Any]:
    from .cli import tls_options

    return {"host": args.host, "port": args.port, **tls_options(args)}


def config_file(args: ServeArgs, planned: Planned) -> dict[str, Any]:
    """The Ray Serve config file (``ServeDeploySchema``) of this command line."""
    from ray.serve.schema import DeploymentSchema

    fields = DeploymentSchema.model_fields  # options only the code sets (the retry count) stay there
    deployments = [{k: v for k, v in options.items() if k in fields}
                   for options in [ingress_options(args)] + [model_options(args, name, plan_)
                                                             for name, plan_, _sess in planned.models]]
    return {"proxy_location": "EveryNode", "http_options": http_options(args),
            "applications": [{"name": APP_NAME, "route_prefix": "/", "import_path": IMPORT_PATH,
                              "args": builder_args(args, env_keys=False), "deployments": deployments}]}


def print_config(args: ServeArgs, planned: Planned) -> None:
    import yaml

    if args.api_keys or args.admin_keys:
        raise UsageError("--print-config writes no keys into a config file",
                         hint="give the keys as --api-keys-file FILE (a path on the ingress's node) or as "
                         f"{ENV_VAR} in the cluster's environment (a KubeRay secret)")
    text = yaml.safe_dump(config_file(args, planned), sort_keys=False)
    sys.stdout.write("# audiocpp serve on Ray Serve: `serve run` / `serve deploy` this file, or embed it\n"
                     "# as a KubeRay RayService's serveConfigV2 (docs/server.md: On a Ray cluster)\n" + text)


def _deploy_failure(error: BaseException) -> AudiocppError:
    """Why the application did not start: the engine's error a replica whose model did not load reported
    (:class:`ModelLoadFailed`, in Ray's status messages), else the last line of Ray's."""
    texts = [str(error)]
    with contextlib.suppress(Exception):  # the controller's status is extra detail only
        app = serve.status().applications.get(APP_NAME)
        if app is not None:
            texts += [app.message] + [d.message for d in app.deployments.values()]
    for text in texts:
        match = re.search(re.escape(LOAD_FAILURE) + r"(\{.*?\})\s*$", text or "", re.MULTILINE)
        with contextlib.suppress(ValueError, KeyError, TypeError):
            if match is not None:
                data = json.loads(match.group(1))
                return AudiocppError(f"model {data['model']!r} did not load on its Ray Serve replica: "
                                     f"{data['message']}", hint=data.get("hint"))
    first = next((t for t in texts if t), str(error))
    last = first.strip().splitlines()[-1][:500] if first.strip() else type(error).__name__
    return AudiocppError(f"the Ray Serve application did not start: {last}",
                         hint="see `serve status` and the logs under /tmp/ray/session_latest/logs")


def serve_on_ray(args: ServeArgs) -> None:
    """``audiocpp serve --ray`` / ``--ray-address``: deploy the app, serve until Ctrl-C or SIGTERM, drain
    up to ``--drain-s``, delete it, and stop the local Ray instance this command started.

    SIGINT / SIGTERM: while starting, the start is abandoned (and cleaned up); while serving, the app
    drains and stops (a second one cuts the drain short). SIGHUP: the ingress reloads its keys file and
    access log. The handlers stay until Ray is left, so that cleaning up is never interrupted."""
    import logging

    from audiocpp.engine.ray_cluster import connect, disconnect

    from .cli import listen

    planned = plan(args, cluster=True)
    if args.print_config:
        print_config(args, planned)
        return
    for name, plan_, _sess in planned.models:
        if plan_.note:
            print(f"note: {plan_.note.replace('using', 'serving', 1)} as {name!r}", file=sys.stderr)
    if not args.ray_address:  # the proxy listens on this machine: a taken port fails at once
        listen(args.host, args.port).close()
    deployed = serve_was_running = serving = False
    stop, again = threading.Event(), threading.Event()
    previous: dict = {}

    def on_stop(signum: int, frame: object) -> None:
        if stop.is_set():
            again.set()
            return
        stop.set()
        if not serving:  # out of the (blocking) deployment, into the clean-up
            say("stopped before the application was serving")
            raise SystemExit(128 + signum)

    def on_hup(signum: int, frame: object) -> None:
        try:
            serve.get_deployment_handle(INGRESS, APP_NAME).broadcast("reload").results(timeout_s=10)
        except Exception as error:  # noqa: BLE001 - said, and serving goes on
            say(f"the ingress did not reload: {error}")

    try:
        connect(ray, args.ray_address, namespace=NAMESPACE)  # --ray: a local Ray instance of its own
        # over Ray's own handlers, which abort the process at a Ctrl-C or SIGTERM
        previous = install_signals({signal.SIGINT: on_stop, signal.SIGTERM: on_stop, signal.SIGHUP: on_hup})
        for name in ("ray", "ray.serve"):
            logging.getLogger(name).setLevel(logging.WARNING)
        with contextlib.suppress(ValueError):  # Ray Serve runs already: it is left running at the end
            serve_was_running = bool(ray.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve"))
        serve.start(proxy_location="HeadOnly", http_options=http_options(args))
        where = f"Ray at {args.ray_address}" if args.ray_address else "a local Ray instance"
        say(f"deploying on {where}: " + ", ".join(
            f"{name} ({_replicas_text(args)})" for name, _p, _s in planned.models) + "...")
        deployed = True
        try:
            serve.run(app_builder(builder_args(args)), name=APP_NAME, route_prefix="/")
        except (RuntimeError, DeploymentUnavailableError) as error:
            raise _deploy_failure(error) from None
        scheme = "https" if args.ssl_certfile else "http"
        print(f"audiocpp serve: listening on {scheme}://{args.host}:{args.port} (Ray Serve application "
              f"{APP_NAME!r}; playground at /)", file=sys.stderr, flush=True)
        serving = True  # from here a signal drains and stops; a second one cuts the drain short
        while not stop.wait(0.5):
            pass
        _drain(args.drain_s, again)
    finally:
        if deployed:
            with contextlib.suppress(Exception):  # already gone
                serve.delete(APP_NAME)
        if ray.is_initialized():
            with contextlib.suppress(Exception):  # never made, or already gone
                ray.kill(ray.get_actor(STORE, namespace=NAMESPACE))
        if ray.is_initialized() and args.ray_address and not serve_was_running:
            with contextlib.suppress(Exception):
                serve.shutdown()
        disconnect(ray, ray.is_initialized())  # this command joined or started Ray: it leaves or stops it
        install_signals(previous)


def _replicas_text(args: ServeArgs) -> str:
    if args.autoscale:
        return f"autoscaling {args.autoscale} replicas"
    n = args.replicas or 1
    return f"{n} replica{'s' if n != 1 else ''}"


def _drain(drain_s: float, cut: threading.Event) -> None:
    """New syntheses are refused (503 with Retry-After) while those in progress finish, up to ``drain_s``
    (or until ``cut``: a second Ctrl-C)."""
    say(f"stopping: waiting up to {drain_s:g} s for requests in progress")
    deadline = time.monotonic() + drain_s
    try:
        handle = serve.get_deployment_handle(INGRESS, APP_NAME)
        while True:  # "drain" again and again: its answer is the requests still in progress
            counts = handle.broadcast("drain").results(timeout_s=10, return_exceptions=True)
            busy = sum(c for c in counts if isinstance(c, int))
            if not busy or cut.is_set() or time.monotonic() >= deadline:
                return
            time.sleep(0.2)
    except Exception:  # noqa: BLE001 - the ingress is gone already: nothing to wait for
        return


__all__ = ["APP_NAME", "Ingress", "ModelDeployment", "ModelReplica", "VoiceStoreActor", "app_builder",
           "builder_args", "config_file", "serve_on_ray"]
