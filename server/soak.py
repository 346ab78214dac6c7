"""The soak: many requests of every kind against one running server, whose threads, open files and resident
memory are read from ``/proc/<pid>`` as it goes.

Request ``i`` of the soak is one of (``cancel_every``, ``voice_every``): a client that leaves its stream
after the first piece; a voice upload, a request in that voice and the voice's deletion; or a plain request
in the next of the response formats (wav and pcm streamed every other time, the others whole). A warm-up
of ``warmup`` requests comes first, then the server is left idle and sampled (``warm``); the rest run with
a sample every ``requests / samples`` requests (the curve); at the end the clients close, the server is
idle again and sampled (``final``). Leaks are ``final`` against ``warm``: threads and file descriptors,
and the growth of resident memory.

Driven by ``python -m audiocpp.server.bench --soak N`` (figures) and ``tests/server/test_load.py`` (a short
run, asserted).
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

#: The response formats the soak asks for, where the server writes them.
SOAK_FORMATS = ("wav", "mp3", "opus", "flac", "pcm")
VOICE_TRANSCRIPT = "This is my voice."


@dataclass(frozen=True)
class Sample:
    """The server process after ``done`` requests: threads, open file descriptors, resident bytes."""

    done: int
    threads: int
    fds: int
    rss: int


def sample(pid: int, done: int = 0) -> Sample:
    """Read ``/proc/<pid>``: its tasks (threads), its fds and its resident pages."""
    with open(f"/proc/{pid}/statm") as fh:
        rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return Sample(done, len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd")), rss)


@dataclass
class SoakReport:
    """What a soak measured (see the module docstring)."""

    requests: int
    warm: Sample
    final: Sample
    wall_s: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # transport errors and 5xx, with what was asked
    kinds: Counter = field(default_factory=Counter)
    curve: list[Sample] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Internal errors: 5xx answers and requests that got no answer."""
        return len(self.failures)

    @property
    def refused(self) -> int:
        """Answers that were neither a success nor an internal error (4xx)."""
        return sum(n for status, n in self.statuses.items() if 400 <= status < 500)

    @property
    def rss_growth(self) -> float:
        """Resident memory at the end against after the warm-up (0.05: 5 % more)."""
        return self.final.rss / self.warm.rss - 1

    def lines(self) -> list[str]:
        mib = 2 ** 20
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.kinds.items()))
        statuses = ", ".join(f"{n}x {status}" for status, n in sorted(self.statuses.items()))
        out = [f"soak: {self.requests} requests ({kinds}) in {self.wall_s:.1f} s",
               f"  answers: {statuses}; internal errors: {self.errors}",
               f"  threads: {self.warm.threads} after warm-up, {max(s.threads for s in self.curve)} at most, "
               f"{self.final.threads} at the end (leaked: {self.final.threads - self.warm.threads})",
               f"  fds: {self.warm.fds} after warm-up, {max(s.fds for s in self.curve)} at most, "
               f"{self.final.fds} at the end (leaked: {self.final.fds - self.warm.fds})",
               f"  RSS: {self.warm.rss / mib:.1f} MiB after warm-up, "
               f"{self.final.rss / mib:.1f} MiB at the end ({100 * self.rss_growth:+.2f} %)",
               "  curve (requests done: RSS MiB, threads, fds):"]
        out += [f"    {s.done:6d}: {s.rss / mib:8.1f} {s.threads:4d} {s.fds:5d}" for s in self.curve]
        out += [f"  failure: {failure}" for failure in self.failures[:5]]
        return out


def reference_wav(seconds: float = 0.15, rate: int = 16000) -> bytes:
    """A short voice-like reference recording (WAV): the uploads' audio."""
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    wave = 0.4 * np.sin(2 * np.pi * 180 * t) + 0.2 * np.sin(2 * np.pi * 414 * t)
    wave *= 0.6 + 0.4 * np.sin(8 * t)
    out = io.BytesIO()
    sf.write(out, wave.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


class _Soak:
    def __init__(self, url: str, pid: int, body: dict[str, Any], formats: list[str], headers: dict[str, str],
                 cancel_every: int, voice_every: int) -> None:
        self.url, self.pid, self.body, self.formats, self.headers = url, pid, body, formats, headers
        self.cancel_every, self.voice_every = cancel_every, voice_every
        self.reference = reference_wav()
        self.statuses: Counter = Counter()
        self.kinds: Counter = Counter()
        self.failures: list[str] = []
        self.done = 0

    def _answer(self, what: str, status: int, text: str = "") -> None:
        self.statuses[status] += 1
        if status >= 500:
            self.failures.append(f"{what}: {status} {text[:200]}")

    async def speech(self, http: httpx.AsyncClient, i: int, *, leave: bool = False,
                     voice: str | None = None) -> None:
        fmt = self.formats[i % len(self.formats)]
        body = {**self.body, "input": f"Request number {i} of the soak.", "seed": i, "response_format": fmt}
        if voice is not None:
            body["voice"] = voice
        streamed = leave or (fmt in ("wav", "pcm") and i % 2 == 0)
        if streamed:
            body["stream_format"] = "audio"
        what = f"request {i} ({fmt}{', streamed' if streamed else ''}{', left' if leave else ''})"
        async with http.stream("POST", self.url + "/v1/audio/speech", json=body) as r:
            async for _ in r.aiter_raw():
                if leave:  # hang up after the first piece: the row leaves the batch
                    break
            text = "" if r.status_code < 400 or leave else (await r.aread()).decode(errors="replace")
        self._answer(what, r.status_code, text)

    async def voice(self, http: httpx.AsyncClient, i: int) -> None:
        name = f"soak-{i}"
        r = await http.post(self.url + "/v1/audio/voices",
                            data={"name": name, "transcript": VOICE_TRANSCRIPT},
                            files={"file": (f"{name}.wav", self.reference, "audio/wav")})
        self._answer(f"upload {name}", r.status_code, r.text)
        if r.status_code == 201:
            await self.speech(http, i, voice=name)
            r = await http.delete(f"{self.url}/v1/audio/voices/{name}")
            self._answer(f"delete {name}", r.status_code, r.text)

    async def one(self, http: httpx.AsyncClient, i: int) -> None:
        try:
            if self.voice_every and i % self.voice_every == self.voice_every - 1:
                self.kinds["voice uploads"] += 1
                await self.voice(http, i)
            elif self.cancel_every and i % self.cancel_every == self.cancel_every // 2:
                self.kinds["left mid-stream"] += 1
                await self.speech(http, i, leave=True)
            else:
                self.kinds["plain"] += 1
                await self.speech(http, i)
        except httpx.HTTPError as error:
            self.failures.append(f"request {i}: {type(error).__name__}: {error}")
        self.done += 1

    async def run(self, first: int, last: int, clients: int, every: int, curve: list[Sample]) -> None:
        """Requests ``first`` to ``last - 1`` from ``clients`` clients at once; a sample every ``every``."""
        todo = iter(range(first, last))

        async def client(http: httpx.AsyncClient) -> None:
            for i in todo:
                await self.one(http, i)
                if every and self.done % every == 0:
                    curve.append(sample(self.pid, self.done))

        async with httpx.AsyncClient(timeout=600, headers=self.headers) as http:
            await asyncio.gather(*[client(http) for _ in range(clients)])

    async def idle(self, like: Sample | None = None, timeout: float = 30) -> Sample:
        """A sample once the server has no request running or queued (and, given ``like``, once its
        sockets of the closed clients are gone: no more fds than ``like``, or ``timeout``)."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=30, headers=self.headers) as http:
            while time.monotonic() < deadline:
                models = (await http.get(self.url + "/health")).json()["models"].values()
                if all(m["synthesizing"] == 0 and m["queued"] == 0 for m in models):
                    break
                await asyncio.sleep(0.05)
        while True:  # the health check's own socket closes too
            now = sample(self.pid, self.done)
            if like is None or now.fds <= like.fds or time.monotonic() > deadline:
                return now
            await asyncio.sleep(0.05)


async def soak(url: str, pid: int, requests: int, body: dict[str, Any], *, clients: int = 8,
               warmup: int | None = None, samples: int = 20, formats: list[str] | None = None,
               cancel_every: int = 10, voice_every: int = 25, headers: dict[str, str] | None = None,
               ) -> SoakReport:
    """Run the soak (module docstring) against the server at ``url`` whose process is ``pid``.
    ``body``: the fields of every speech request (``model`` and the family's options)."""
    from .encoding import available

    formats = formats or [name for name in SOAK_FORMATS if available(name)]
    run = _Soak(url, pid, body, formats, headers or {}, cancel_every, voice_every)
    warmup = max(1, requests // 10) if warmup is None else warmup
    t0 = time.perf_counter()
    await run.run(0, warmup, clients, 0, [])
    warm = await run.idle()
    curve = [warm]
    await run.run(warmup, requests, clients, max(1, (requests - warmup) // samples), curve)
    final = await run.idle(like=warm)
    curve.append(final)
    return SoakReport(requests, warm, final, time.perf_counter() - t0, run.statuses, run.failures, run.kinds,
                      curve)
