"""The state a running server shares between its routes, its gate and its front ends (HTTP, the
WebSocket, Wyoming, the Kokoro-FastAPI routes): the served models, voices, keys, limits, metrics."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from .audit import AccessLog, add_audio
from .auth import KeyRing, Principal, say
from .limits import Limits
from .metrics import ServerMetrics
from .request_log import RequestLog
from .scheduler import ModelWorker
from .served_models import ServedModel
from .speech import (
    SpeechPlan,
)
from .voices import VoiceStore, VoiceView


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
    request_log: RequestLog | None = None  # the line per request on the terminal (None: --quiet)
    metrics_public: bool = False
    max_voices_per_key: int | None = 32
    loop: asyncio.AbstractEventLoop | None = None  # the running event loop (SIGHUP reloads in it)
    #: plan requests on a worker thread (on Ray Serve: the voice store and a language check are remote
    #: calls); a single-machine server plans in the event loop, as it always has
    plan_in_thread: bool = False
    #: side work (encoding, uploads, the voice store) on the server's own few threads, each with one torch
    #: thread (server/side_work.py); off: the event loop's default executor, as its host set it
    side_pool: bool = False

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

    @property
    def logs_requests(self) -> bool:
        return self.access_log is not None or self.request_log is not None

    def log_request(self, record: dict[str, Any]) -> None:
        """A finished request's record (``audit.FIELDS``) to the access log and the terminal."""
        if self.access_log is not None:
            self.access_log.write(record)
        if self.request_log is not None:
            self.request_log.write(record)

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
