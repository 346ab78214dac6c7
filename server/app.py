"""The FastAPI application: routes over the served models, the voice store and the metrics.

Everything slow (synthesis, encoding, decoding uploads) runs on worker threads, so the event
loop keeps answering ``/health`` and refusing over-capacity requests at once under load.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.tasks import Task

from .asgi import JobStreamingResponse, LimitAndCount
from .audit import AccessLog, add_audio, note
from .auth import ANONYMOUS, KeyRing, Principal, say
from .encoding import available_formats, wav_stream_header
from .errors import ApiError, from_engine_error, internal_error
from .gate import Gate
from .limits import Limits
from .metrics import ServerMetrics
from .models import ServedModel
from .scheduler import Cancelled, Job, ModelWorker, as_asyncio
from .speech import (
    OPENAI_MODELS,
    SpeechPlan,
    observe,
    parse_body,
    pick_model,
    plan_speech,
    request_id,
    result_headers,
    sent_seconds,
    timing,
)
from .voices import OPENAI_VOICES, VoiceStore, VoiceView, check_reference, voice_not_found

POLL_S = 0.1  # how often a waiting non-streaming request checks that its client is still there


@dataclass
class ServerState:
    models: dict[str, ServedModel]
    workers: dict[str, ModelWorker]
    voices: VoiceStore
    metrics: ServerMetrics
    max_input_chars: int = 4096
    max_body_bytes: int = 16 << 20
    wyoming_seed: int | None = None  # the seed of Wyoming syntheses (None: a fresh one each)
    keys: KeyRing | None = None  # None or not enabled: no keys, every request is ANONYMOUS
    limits: Limits = field(default_factory=Limits)
    access_log: AccessLog | None = None
    metrics_public: bool = False
    max_voices_per_key: int | None = 32
    loop: asyncio.AbstractEventLoop | None = None  # the running event loop (SIGHUP reloads in it)
    #: plan requests on a worker thread (on Ray Serve: the voice store and a language check are remote
    #: calls); a single-machine server plans in the event loop, as it always has
    plan_in_thread: bool = False

    async def plan(self, make: Any) -> Any:
        """``make()`` (a request's plan), in the event loop or on a worker thread (``plan_in_thread``)."""
        return await run_in_threadpool(make) if self.plan_in_thread else make()

    def view(self, principal: Principal) -> VoiceView:
        """The stored voices ``principal`` sees."""
        return VoiceView(self.voices, principal, self.keys, self.max_voices_per_key)

    def account(self, plan: SpeechPlan, scope_state: dict[str, Any] | None, text: str | None = None):
        """What a synthesis of ``plan`` does with the seconds of audio it sent: the key's audio limit and
        metrics, and the request's audit record."""
        principal = plan.principal

        def record(seconds: float) -> None:
            self.limits.add_audio(principal, seconds)
            self.metrics.add_key_audio(principal.label, seconds)
            if scope_state is not None:
                add_audio(scope_state, seconds, text)

        return record

    def reload(self) -> None:
        """SIGHUP: the keys file read again, the access log reopened (in the event loop's thread)."""
        if self.keys is not None and self.keys.file is not None:
            say(self.keys.reload())
        if self.access_log is not None:
            say(self.access_log.reopen())

    def request_reload(self) -> None:
        """From a signal handler: reload in the event loop when it runs (no write is then half done)."""
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self.reload)
        else:
            self.reload()

    def shutdown(self) -> None:
        for worker in self.workers.values():
            worker.shutdown()


class ClientGone(Exception):
    """The client disconnected before its response started."""


def _error_response(error: ApiError, extra: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers={**error.headers, **(extra or {})})


def api_error(error: BaseException) -> ApiError:
    if isinstance(error, ApiError):
        return error
    if isinstance(error, AudiocppError):
        return from_engine_error(error)
    print(f"audiocpp serve: internal error: {type(error).__name__}: {error}", file=sys.stderr)
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    return internal_error(error)


async def _wait(future: asyncio.Future, job: Job, request: Request, *, items: bool = False) -> Any:
    """Wait for ``future`` (or, with ``items``, the job's first streamed item); cancel the job
    and raise ClientGone if the client disconnects meanwhile."""
    getter = asyncio.ensure_future(job.items.get()) if items and job.items is not None else None
    try:
        while True:
            waiting = {future} if getter is None else {future, getter}
            done, _ = await asyncio.wait(waiting, timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED)
            if getter is not None and getter in done:
                return getter.result()
            if future in done:
                return None
            if await request.is_disconnected():
                job.cancel()
                raise ClientGone()
    finally:
        if getter is not None and not getter.done():
            getter.cancel()


def create_app(state: ServerState, wyoming_socket: Any = None) -> FastAPI:
    """The app; with ``wyoming_socket`` (bound), the Wyoming server runs in the same event loop."""
    from contextlib import asynccontextmanager

    from .playground import PAGE

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        server = None
        if wyoming_socket is not None:
            from . import wyoming

            server = await wyoming.start(state, wyoming_socket)
        try:
            yield
        finally:
            if server is not None:
                await server.aclose()

    app = FastAPI(title="audiocpp", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.audiocpp = state
    state.metrics.add_gauge("audiocpp_queue_depth", "Admitted requests waiting to synthesize.",
                            lambda: {n: w.queued for n, w in state.workers.items()})
    state.metrics.add_gauge("audiocpp_synthesizing", "Requests synthesizing now (rows of the model's batch).",
                            lambda: {n: w.synthesizing for n, w in state.workers.items()})

    @app.exception_handler(ApiError)
    async def _onapi_error(request: Request, error: ApiError) -> JSONResponse:
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "path", "query")]
        param = loc[0] if loc else None
        return _error_response(ApiError(400, f"{param}: {first.get('msg')}", param=param,
                                        code="invalid_value"))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code)
        message = (f"no route {request.method} {request.url.path}" if error.status_code in (404, 405)
                   else str(error.detail))
        return _error_response(ApiError(error.status_code, message, code=code))

    @app.exception_handler(Exception)
    async def _on_exception(request: Request, error: Exception) -> JSONResponse:
        return _error_response(api_error(error))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def playground() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "models": {
            name: {"family": state.models[name].family, "queued": w.queued, "synthesizing": w.synthesizing,
                   "capacity": w.capacity, "max_batch": w.max_batch} for name, w in state.workers.items()}}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        await state.metrics.refresh()
        return PlainTextResponse(state.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [m.describe() for m in state.models.values()],
                "response_formats": available_formats()}

    @app.get("/v1/models/{name}")
    async def get_model(name: str, request: Request) -> dict[str, Any]:
        if name in OPENAI_MODELS:  # OpenAI's names mean the first model, as in a speech request
            served = pick_model(state.models, name)
            request.state.model = served.name
            return {**served.describe(), "id": name, "alias_of": served.name}
        served = state.models.get(name)
        if served is None:
            raise ApiError(404, f"model {name!r} is not served here; served models: {', '.join(state.models)}"
                           f" (and OpenAI's names {', '.join(OPENAI_MODELS)} for the first)", param="model",
                           code="model_not_found")
        request.state.model = served.name
        return served.describe()

    @app.get("/v1/audio/models")
    async def audio_models() -> dict[str, Any]:
        """Open WebUI's list of speech models (``{base}/audio/models``): the served models, then
        OpenAI's names (the first model)."""
        first = next(iter(state.models))
        return {"models": [{"id": name, "name": f"{name} ({served.model.spec.display_name})"}
                           for name, served in state.models.items()]
                + [{"id": name, "name": f"{name} (= {first})"} for name in OPENAI_MODELS]}

    @app.get("/v1/audio/voices")
    async def list_voices(request: Request, legacy: bool = False) -> dict[str, Any]:
        """The voices a request can use: ``default``, the named voices of the served models (Kokoro's,
        with their languages) and each stored voice some served model clones with (``models`` names
        them; a voice no model can use is not offered). A key sees its own voices and the shared ones;
        an admin key every voice. ``?legacy=true``: Kokoro-FastAPI's old shape, the names alone."""
        view = state.view(_principal(request))
        stored = await run_in_threadpool(view.list)
        listed = voice_listing(state.models, stored, view)
        if legacy:
            return {"voices": [voice["id"] for voice in listed["voices"]]}
        return listed

    @app.get("/v1/audio/voices/{name:path}")
    async def get_voice(name: str, request: Request) -> dict[str, Any]:
        """One stored voice this key sees (another key's is a 404, as a name nobody uses)."""
        check_reference(name)
        view = state.view(_principal(request))
        voice = await run_in_threadpool(view.get, name)
        if voice is None:
            raise voice_not_found(name)
        return view.describe(voice)

    @app.post("/v1/audio/voices", status_code=201)
    async def add_voice(request: Request) -> JSONResponse:
        """Multipart ``name``, ``file`` (or OpenAI's ``audio_sample``) and ``transcript``."""
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise ApiError(415, "send the voice as multipart/form-data with fields name, file and transcript",
                           code="unsupported_media_type")
        async with request.form(max_files=1, max_fields=8) as form:
            name, transcript = form.get("name"), form.get("transcript") or ""
            upload = form.get("file") or form.get("audio_sample")
            if form.get("type") not in (None, "audio_sample"):
                raise ApiError(400, "only voices from an audio sample are supported (type=audio_sample)",
                               param="type", code="unsupported_voice_type")
            if not isinstance(name, str) or not name:
                raise ApiError(400, "the form field 'name' is missing", param="name", code="missing_field")
            if upload is None or isinstance(upload, str):
                raise ApiError(400, "the form field 'file' (the audio) is missing", param="file",
                               code="missing_field")
            if not isinstance(transcript, str):
                raise ApiError(400, "the form field 'transcript' must be text", param="transcript",
                               code="invalid_value")
            shared = form.get("shared")
            if shared not in (None, "true", "false"):
                raise ApiError(400, "the form field 'shared' is true or false", param="shared",
                               code="invalid_value")
            data = await upload.read()
        _check_usable(state, transcript.strip())
        view = state.view(_principal(request))
        note(_scope_state(request), voice=name, chars=len(transcript.strip()))
        voice = await run_in_threadpool(lambda: view.add(name, data, transcript.strip(),
                                                         shared=shared == "true"))
        return JSONResponse(view.describe(voice), status_code=201)

    @app.delete("/v1/audio/voices/{name:path}")
    async def delete_voice(name: str, request: Request) -> dict[str, Any]:
        """Delete a voice: a key its own; an admin key any (another key's as ``<label>/<name>``)."""
        check_reference(name)
        view = state.view(_principal(request))
        note(_scope_state(request), voice=name)
        voice = await run_in_threadpool(view.delete, name)
        return {"id": view.voice_id(voice), "object": "audio.voice.deleted", "deleted": True}

    @app.post("/v1/audio/speech")
    async def speech(request: Request) -> Response:
        data = await read_json(request)
        plan = await plan_request(state, request, data, parse_body)
        run = await run_speech(state, request, plan)
        if isinstance(run, Response):
            return run
        if run.whole:  # the whole file (also stream_format=audio for flac, mp3, opus)
            observe(state.metrics, plan, run.result)
            headers = result_headers(run.result, plan.served, plan.output_rate)
            return Response(run.audio, media_type=plan.fmt.media_type, headers={**headers, **run.job.headers})
        if plan.stream_format == "sse":
            return _sse_response(state, plan, run.job, run.future, run.first)
        return _audio_stream_response(state, plan, run.job, run.future, run.first)

    @app.websocket("/v1/audio/speech/stream")
    async def speech_stream(websocket: WebSocket) -> None:
        from .websocket import speech_stream as run

        await run(websocket, state)

    from .dev_routes import router as dev_router

    app.include_router(dev_router)
    app.add_middleware(LimitAndCount, limit=state.max_body_bytes, metrics=state.metrics)
    app.add_middleware(Gate, state=state)  # outermost: who the request is, before anything else
    return app


async def read_json(request: Request) -> Any:
    """The request's body as JSON, or a 400."""
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not valid JSON", code="invalid_json") from None


async def plan_request(state: ServerState, request: Request, data: Any, parse: Any) -> SpeechPlan:
    """A synthesis body (``parse(data)``: a SpeechBody) planned for the request's key, the model noted for
    the metrics (from the body's ``model`` as soon as it names a served one) and the audit trail."""
    named = data.get("model") if isinstance(data, dict) else None
    if named is None or (isinstance(named, str) and (named in state.models or named in OPENAI_MODELS)):
        request.state.model = pick_model(state.models, named).name  # the metrics' label from here on
    principal = _principal(request)
    body = parse(data)
    plan = await state.plan(lambda: plan_speech(body, state.models, state.view(principal),
                                                state.max_input_chars, principal))
    request.state.model = plan.served.name
    return plan


@dataclass
class SpeechRun:
    """A synthesis under way or done: ``whole`` (its ``result`` and encoded ``audio``) or streaming (its
    ``job``'s pieces, ``first`` of them already taken)."""

    job: Job
    future: asyncio.Future
    first: list[Any] = field(default_factory=list)
    result: Any = None
    audio: bytes = b""

    @property
    def whole(self) -> bool:
        return self.result is not None


async def run_speech(state: ServerState, request: Request, plan: SpeechPlan) -> SpeechRun | Response:
    """Queue a planned synthesis on its model (the audit record and the key's accounting with it) and
    wait for its first piece, or its end: a :class:`SpeechRun`, or the Response of a failure (an
    OpenAI error; 499 for a client that went away)."""
    audit_state = _scope_state(request)
    note(audit_state, voice=plan.voice_name, clone=plan.task is Task.CLONE, chars=len(plan.request.text),
         audio_s=0.0, text=plan.request.text)
    plan.account = state.account(plan, audit_state)
    worker = state.workers[plan.served.name]
    job = Job(asyncio.get_running_loop() if plan.stream_format else None)
    future = as_asyncio(worker.submit_speech(plan, job, state.voices))
    try:
        first = await _wait(future, job, request, items=plan.stream_format is not None)
    except ClientGone:
        return Response(status_code=499)
    if first is None:  # finished before any streamed piece: one complete response
        try:
            result, audio = future.result()
        except Cancelled:
            return Response(status_code=499)
        except BaseException as error:  # noqa: BLE001 - reported as an OpenAI error
            return _error_response(api_error(error), job.headers)
        if not plan.incremental:
            return SpeechRun(job, future, [], result, audio)
    return SpeechRun(job, future, [] if first is None else [first])


async def whole_response(state: ServerState, request: Request, plan: SpeechPlan) -> Response:
    """A planned synthesis answered with its whole file (Kokoro-FastAPI's ``Content-Disposition`` on it)."""
    run = await run_speech(state, request, plan)
    if isinstance(run, Response):
        return run
    assert run.whole, "a plan without stream_format is answered whole"
    observe(state.metrics, plan, run.result)
    headers = {**result_headers(run.result, plan.served, plan.output_rate), **run.job.headers,
               "Content-Disposition": f"attachment; filename=speech.{plan.fmt.name}"}
    return Response(run.audio, media_type=plan.fmt.media_type, headers=headers)


def voice_listing(models: dict[str, ServedModel], stored: list[Any], view: VoiceView) -> dict[str, Any]:
    """``GET /v1/audio/voices``: ``default``, every served model's named voices (one entry per name, with
    the models that have it) and the stored voices some model clones with; ``aliases``: what OpenAI's
    voice names mean on the first model (``default``: the family's own voice)."""
    from .named_voices import describe_named

    voices: list[dict[str, Any]] = [{"id": "default", "name": "default", "type": "builtin", "stored": False,
                                     "description": "the model's own (default) voice",
                                     "models": list(models)}]
    named: dict[str, dict[str, Any]] = {}
    for name, served in models.items():
        for voice in describe_named(served):
            entry = named.setdefault(voice["id"], {**voice, "models": []})
            entry["models"].append(name)
    voices += named.values()
    for voice in stored:
        usable = [name for name, served in models.items() if served.clones_with(voice.transcript)]
        if usable:
            voices.append({**view.describe(voice), "models": usable})
    first = next(iter(models.values()))
    aliases = first.openai_voices() or {name: "default" for name in OPENAI_VOICES}
    return {"voices": voices, "aliases": aliases}


def _scope_state(request: Request) -> dict[str, Any]:
    """The request's scope state (the gate writes the audit record from it when the request ends)."""
    return request.scope.setdefault("state", {})


def _principal(request: Request) -> Principal:
    """Who the request is (set by the gate; a server without keys: everyone is ANONYMOUS)."""
    return getattr(request.state, "principal", ANONYMOUS)


def _check_usable(state: ServerState, transcript: str) -> None:
    """An upload some served model can clone with, or a 400 saying what the models need."""
    if any(served.clones_with(transcript) for served in state.models.values()):
        return
    cloners = [f"{name} ({served.model.spec.display_name})" for name, served in state.models.items()
               if "clone" in served.model.spec.tasks]
    if not cloners:
        raise ApiError(400, f"no served model clones voices ({', '.join(state.models)}), so a stored voice "
                       "could not be used", param="file", code="unsupported_voice")
    raise ApiError(400, f"the served models ({', '.join(cloners)}) clone only with the transcript of the "
                   "reference audio, and this upload has none: send the exact words spoken in it as the form "
                   "field transcript (with the openai client: extra_body={\"transcript\": \"...\"})",
                   param="transcript", code="missing_transcript")


async def job_items(job: Job, future: asyncio.Future, first: list[Any] = ()) -> AsyncIterator[Any]:
    """The streamed pieces in order: ``first``, then the job's queue until the synthesis ends."""
    for item in first:
        yield item
    assert job.items is not None
    getter: asyncio.Future | None = None
    try:
        while True:
            getter = asyncio.ensure_future(job.items.get())
            done, _ = await asyncio.wait({getter, future}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
                continue
            getter.cancel()
            while not job.items.empty():  # pieces put before the end are already queued
                yield job.items.get_nowait()
            return
    finally:  # also when the client went away mid-stream: no task is left pending
        if getter is not None and not getter.done():
            getter.cancel()


def stream_headers(plan: SpeechPlan, job: Job) -> dict[str, str]:
    return {"X-Request-Id": request_id(), "X-AudioCPP-Model": plan.served.name,
            "X-AudioCPP-Sample-Rate": str(plan.output_rate), "X-Accel-Buffering": "no",
            "Cache-Control": "no-cache", **job.headers}


def _audio_stream_response(state: ServerState, plan: SpeechPlan, job: Job, future: asyncio.Future,
                           first: list[Any]) -> Response:
    async def body() -> AsyncIterator[bytes]:
        if plan.fmt.name == "wav":
            yield wav_stream_header(plan.output_rate)
        async for item in job_items(job, future, first):
            yield item[1]
        result, _ = future.result()  # a failure after the first piece ends the stream abruptly
        observe(state.metrics, plan, result, sent_seconds(job, plan))

    return JobStreamingResponse(body(), job.cancel, media_type=plan.fmt.media_type,
                                headers=stream_headers(plan, job))


def _sse_response(state: ServerState, plan: SpeechPlan, job: Job, future: asyncio.Future,
                  first: list[Any]) -> Response:
    def event(payload: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    async def body() -> AsyncIterator[bytes]:
        async for item in job_items(job, future, first):
            words = item[3] if len(item) > 3 else []
            if plan.timestamps and words:  # before the audio that speaks them
                yield event({"type": "speech.audio.timestamps", "words": [w.as_dict() for w in words]})
            yield event({"type": "speech.audio.delta", "audio": base64.b64encode(item[1]).decode()})
        try:
            final, _ = future.result()
        except BaseException as error:  # noqa: BLE001 - told to the client as an event
            if isinstance(error, Cancelled):
                return
            yield event({"type": "speech.audio.error", **api_error(error).body()})
            return
        sent = sent_seconds(job, plan)  # the deltas' audio: pieces without the offline file's cross-fades
        observe(state.metrics, plan, final, sent)
        yield event({"type": "speech.audio.done", "format": "pcm",
                     "timing": timing(final, plan.output_rate, sent),
                     "usage": {"input_characters": len(plan.request.text), "output_audio_seconds":
                               round(sent, 3)}})

    return JobStreamingResponse(body(), job.cancel, media_type="text/event-stream",
                                headers=stream_headers(plan, job))


__all__ = ["ServerState", "create_app"]
