"""Kokoro-FastAPI's ``/dev`` routes, so that its clients work unchanged: each handler parses the body,
calls one service function and returns. They go through the same gate (keys, rate and audio limits),
model queues, batches and errors as ``POST /v1/audio/speech``.

- ``POST /dev/phonemize``: text -> phonemes and token ids (``server.phonemes``);
- ``POST /dev/generate_from_phonemes``: phonemes -> audio (``server.phonemes``);
- ``POST /dev/captioned_speech``: speech with word timestamps, whole or as JSON lines (``server.captioned``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .audit import note
from .captioned import captioned_speech as captioned_service
from .phonemes import phonemes_body
from .phonemes import phonemize as phonemize_service
from .service import plan_request, read_json, whole_response
from .state import ServerState

router = APIRouter()


def _state(request: Request) -> ServerState:
    return request.app.state.audiocpp


@router.post("/dev/phonemize")
async def phonemize(request: Request) -> dict[str, Any]:
    state = _state(request)
    data = await read_json(request)
    served, found = await phonemize_service(state, data, state.max_input_chars)
    request.state.model = served.name
    note(request.scope.setdefault("state", {}), chars=len(data.get("text", "")))
    return found


@router.post("/dev/generate_from_phonemes")
async def generate_from_phonemes(request: Request) -> Response:
    state = _state(request)
    data = await read_json(request)
    plan = await plan_request(state, request, data, lambda d: phonemes_body(state, d))
    return await whole_response(state, request, plan)


@router.post("/dev/captioned_speech")
async def captioned_speech(request: Request) -> Response:
    return await captioned_service(_state(request), request, await read_json(request))


__all__ = ["router"]
