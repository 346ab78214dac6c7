"""The FastAPI application: routes over the served models, the voice store and the metrics.

A synthesis is an asyncio task over its model's executor (server/scheduler.py: no thread per request);
what is slow besides the model (encoding a whole file, decoding uploads, the voice store) runs on
the server's few side threads (server/side_work.py), so the event loop keeps answering ``/health``
and refusing over-capacity requests at once under load.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .asgi import LimitAndCount
from .audit import note
from .encoding import available_formats
from .errors import ApiError
from .gate import Gate
from .service import (
    _audio_stream_response,
    _check_usable,
    _error_response,
    _principal,
    _scope_state,
    _sse_response,
    api_error,
    plan_request,
    read_json,
    run_speech,
    voice_listing,
)
from .side_work import use_side_pool
from .speech import (
    OPENAI_MODELS,
    observe,
    parse_body,
    pick_model,
    result_headers,
)
from .state import ServerState
from .voices import check_reference, voice_not_found


def create_app(state: ServerState, wyoming_socket: Any = None) -> FastAPI:
    """The app; with ``wyoming_socket`` (bound), the Wyoming server runs in the same event loop."""
    from contextlib import asynccontextmanager

    from .playground import PAGE

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        if state.side_pool:
            use_side_pool(state.loop)
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
        stored = await asyncio.to_thread(view.list)
        listed = voice_listing(state.models, stored, view)
        if legacy:
            return {"voices": [voice["id"] for voice in listed["voices"]]}
        return listed

    @app.get("/v1/audio/voices/{name:path}")
    async def get_voice(name: str, request: Request) -> dict[str, Any]:
        """One stored voice this key sees (another key's is a 404, as a name nobody uses)."""
        check_reference(name)
        view = state.view(_principal(request))
        voice = await asyncio.to_thread(view.get, name)
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
        voice = await asyncio.to_thread(lambda: view.add(name, data, transcript.strip(),
                                                         shared=shared == "true"))
        return JSONResponse(view.describe(voice), status_code=201)

    @app.delete("/v1/audio/voices/{name:path}")
    async def delete_voice(name: str, request: Request) -> dict[str, Any]:
        """Delete a voice: a key its own; an admin key any (another key's as ``<label>/<name>``)."""
        check_reference(name)
        view = state.view(_principal(request))
        note(_scope_state(request), voice=name)
        voice = await asyncio.to_thread(view.delete, name)
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


__all__ = ["ServerState", "create_app"]
