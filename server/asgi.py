"""Plain ASGI pieces under the FastAPI app: the body-size limit, request counting, and a
streaming response that notices a client going away while the synthesis is still running."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ApiError
from .metrics import ServerMetrics

#: Endpoints counted in the metrics (others, such as /health and /metrics, are not).
COUNTED = ("/v1/audio/speech", "/v1/audio/voices", "/v1/audio/models", "/v1/models", "/dev/phonemize",
           "/dev/generate_from_phonemes", "/dev/captioned_speech")


class BodyTooLarge(ApiError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than this server's limit of {limit} bytes",
                         code="body_too_large")


async def send_error(send: Send, error: ApiError) -> None:
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class LimitAndCount:
    """Refuses bodies over ``limit`` bytes (by Content-Length at once, or while reading a body
    without one) and counts requests by endpoint, model (``request.state.model``) and status."""

    def __init__(self, app: ASGIApp, limit: int, metrics: ServerMetrics) -> None:
        self.app = app
        self.limit = limit
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        endpoint = next((p for p in COUNTED if path == p or path.startswith(p + "/")), None)
        status = {"code": 0}

        async def counting_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.limit:
                await send_error(counting_send, BodyTooLarge(self.limit))
                return
            received = 0

            async def limited_receive() -> dict[str, Any]:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.limit:
                        raise BodyTooLarge(self.limit)
                return message

            await self.app(scope, limited_receive, counting_send)
        finally:
            if endpoint is not None and status["code"]:
                model = (scope.get("state") or {}).get("model", "")
                self.metrics.count_request(endpoint, model, status["code"])


class JobStreamingResponse(StreamingResponse):
    """A StreamingResponse that listens for the client's disconnect while it waits for audio,
    and then calls ``on_disconnect`` (cancelling the synthesis) instead of finding out only at
    its next write."""

    def __init__(self, content: Any, on_disconnect: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = {"done": False}
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                        finished["done"] = True
                    except OSError:  # the client went away during a write
                        pass
                    group.cancel_scope.cancel()

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            break
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                group.start_soon(watch)
        finally:
            if not finished["done"]:
                self.on_disconnect()
