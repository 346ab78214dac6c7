"""The gate in front of every route (an ASGI middleware, outermost): who the request is, whether it may
come in, and the audit line once it is answered.

- ``/v1`` and everything under it, and ``/dev`` (Kokoro-FastAPI's routes), HTTP and WebSocket: with keys
  configured, a key (``auth.bearer``; a WebSocket also ``?api_key=``) or 401 with OpenAI's
  ``invalid_api_key`` body and ``WWW-Authenticate: Bearer``, before the route is even looked up (an
  unknown ``/v1`` or ``/dev`` route is a 401 too, so routes do not leak either); then the key's rate
  limit and, for synthesis, its audio limit (429 with ``Retry-After``). The principal goes to the route
  as ``request.state.principal``.
- ``/health`` and ``/`` (the playground) are open; ``/metrics`` is open to this machine (a loopback
  client), to an admin key, or to everyone with ``--metrics-public``, else 403.
- Every request, refused or not, is counted (``audiocpp_key_requests_total`` by the key's label,
  ``audiocpp_auth_failures_total``) and written to the access log (``audit``) and as a line on the
  terminal (``request_log``).

A refused WebSocket gets a real HTTP response to its handshake (401/429 with the JSON body), through
the ASGI ``websocket.http.response`` extension where the server has it (uvicorn does), else an
``error`` message and close code 1008.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

from .asgi import COUNTED, send_error
from .audit import client_address
from .auth import ANONYMOUS, Principal, bearer, client_is_loopback, unauthorized, websocket_credential
from .errors import ApiError
from .limits import LimitExceeded

if TYPE_CHECKING:
    from .state import ServerState

#: Routes that synthesize (the audio limit applies before they start).
SYNTHESIS = ("/v1/audio/speech", "/v1/audio/speech/stream", "/dev/captioned_speech",
             "/dev/generate_from_phonemes")
#: The path prefixes behind keys: OpenAI's API and Kokoro-FastAPI's /dev routes.
PROTECTED = ("/v1", "/dev")


def protected(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in PROTECTED)


class Gate:
    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope.get("path", "")
        scope_state = scope.setdefault("state", {})
        audit = scope_state.setdefault("audit", {})
        seen = {"status": 0}

        async def watching_send(message: dict[str, Any]) -> None:
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                seen["status"] = int(message["status"])
            await send(message)

        principal: Principal | None = None
        rejected: str | None = None
        try:
            if path == "/metrics" and kind == "http":
                denial = self._metrics_denial(scope)
            elif protected(path):
                principal, denial = self._admit(scope, kind, path)
                if isinstance(denial, LimitExceeded):
                    rejected = denial.reason
            else:
                denial = None
            if denial is not None:
                await self._deny(scope, receive, watching_send, denial, principal)
                return
            if principal is not None:
                scope_state["principal"] = principal
            await self.app(scope, receive, watching_send)
        finally:
            status = int(audit.get("status") or seen["status"] or (101 if kind == "websocket" else 0))
            if principal is not None and protected(path):
                if status == 429 and rejected is None:
                    rejected = "queue"
                self.state.metrics.count_key_request(principal.label, status, rejected)
            self._audit(scope, principal, status, started, audit)

    # -- deciding ----------------------------------------------------------------------------------
    def _admit(self, scope: Scope, kind: str, path: str) -> tuple[Principal | None, ApiError | None]:
        keys = self.state.keys
        principal: Principal | None = ANONYMOUS
        if keys is not None and keys.enabled:
            headers = scope.get("headers") or []
            credential = (websocket_credential(headers, scope.get("query_string", b"")) if kind == "websocket"
                          else bearer(headers))
            principal = keys.authenticate(credential.value) if credential.value is not None else None
            if principal is None:
                reason = credential.problem or "invalid"
                self.state.metrics.count_auth_failure(reason)
                return None, unauthorized(credential, websocket=kind == "websocket")
        assert principal is not None
        denial = self.state.limits.admit_request(principal)
        if denial is None and path in SYNTHESIS and (kind == "websocket" or scope.get("method") == "POST"):
            denial = self.state.limits.check_audio(principal)
        return principal, denial

    def _metrics_denial(self, scope: Scope) -> ApiError | None:
        if self.state.metrics_public or client_is_loopback(scope.get("client")):
            return None
        keys = self.state.keys
        if keys is not None and keys.enabled:
            credential = bearer(scope.get("headers") or [])
            principal = keys.authenticate(credential.value) if credential.value is not None else None
            if principal is not None and principal.admin:
                return None
        return ApiError(403, "/metrics is served to this machine and to admin keys only; the server's "
                        "operator can publish it (--metrics-public)", code="forbidden")

    async def _deny(self, scope: Scope, receive: Receive, send: Send, error: ApiError,
                    principal: Principal | None) -> None:
        endpoint = self._endpoint(scope)
        if endpoint is not None:
            self.state.metrics.count_request(endpoint, "", error.status)
        if scope["type"] == "http":
            await send_error(send, error)
            return
        message = await receive()  # websocket.connect
        if message["type"] != "websocket.connect":
            return
        if "websocket.http.response" in (scope.get("extensions") or {}):
            body = json.dumps(error.body()).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
            await send({"type": "websocket.http.response.start", "status": error.status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps({
            "type": "error", "message": error.message, "code": error.code, "param": error.param})})
        await send({"type": "websocket.close", "code": 1008})
        scope.setdefault("state", {}).setdefault("audit", {})["status"] = error.status

    @staticmethod
    def _endpoint(scope: Scope) -> str | None:
        path = scope.get("path", "")
        if scope["type"] == "websocket":
            return path if protected(path) else None
        return next((p for p in COUNTED if path == p or path.startswith(p + "/")), None)

    # -- the audit trail --------------------------------------------------------------------------------
    def _audit(self, scope: Scope, principal: Principal | None, status: int, started: float,
               audit: dict[str, Any]) -> None:
        if not self.state.logs_requests:
            return
        keyed = self.state.keys is not None and self.state.keys.enabled
        websocket = scope["type"] == "websocket"
        record = {
            "time": time.time(), "key": principal.label if principal is not None and keyed else None,
            "client": client_address(scope.get("client")), "protocol": "websocket" if websocket else "http",
            "method": None if websocket else scope.get("method"), "route": scope.get("path"),
            "model": (scope.get("state") or {}).get("model") or audit.get("model"),
            "voice": audit.get("voice"), "clone": audit.get("clone"), "chars": audit.get("chars"),
            "audio_s": audit.get("audio_s"), "status": status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 1), "text": audit.get("text")}
        if websocket:
            record["sentences"] = audit.get("sentences", 0)
        self.state.log_request(record)
