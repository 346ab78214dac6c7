"""The speech service under the routes: planning a request against the served models, running it as a
job of its model, and answering with the whole file or a stream (audio or server-sent events). The
routes (``app``, ``dev_routes``, ``captioned``) parse, call these and return."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.tasks import Task

from .asgi import JobStreamingResponse
from .audit import note
from .auth import ANONYMOUS, Principal
from .encoding import wav_stream_header
from .errors import ApiError, from_engine_error, internal_error
from .scheduler import Cancelled, Job, as_asyncio
from .served_models import ServedModel
from .speech import (
    OPENAI_MODELS,
    SpeechPlan,
    observe,
    pick_model,
    plan_speech,
    request_id,
    result_headers,
    sent_seconds,
    timing,
)
from .state import ServerState
from .voices import OPENAI_VOICES, VoiceView

POLL_S = 0.1  # how often a waiting non-streaming request checks that its client is still there


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


