"""Per-key limits: ``--rate-limit N/min`` (requests) and ``--audio-limit SECONDS/day`` (seconds of audio
synthesized), each over a sliding window of its period, per key (on a server without keys: for all its
clients together).

A request over a limit is refused at once with 429, OpenAI's ``rate_limit_exceeded`` body and a
``Retry-After`` that is exact: the seconds (rounded up) until the window has room again, so a client
that waits that long gets through. Requests count when they are admitted; audio counts when it has been
sent (a request that starts under the audio limit finishes, and the next one waits). Periods: ``s``,
``min``, ``h``, ``day`` (plurals and a count, ``10s``, ``2h``, are taken too).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from audiocpp.engine.errors import UsageError

from .auth import Principal
from .errors import ApiError

PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0,
           "d": 86400.0, "day": 86400.0}
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*([A-Za-z]+)\s*$")


@dataclass(frozen=True)
class Limit:
    amount: float
    period_s: float
    text: str

    @classmethod
    def parse(cls, text: str, flag: str, example: str, *, whole: bool = False) -> Limit:
        match = _LIMIT.match(text)
        unit = match.group(3).lower() if match else ""
        if match and unit not in PERIODS and unit.endswith("s") and unit[:-1] in PERIODS:
            unit = unit[:-1]
        if match is None or unit not in PERIODS:
            raise UsageError(f"{flag} {text!r} is not AMOUNT/PERIOD", hint=f"for example {flag} {example} "
                             "(periods: s, min, h, day; 10s, 2h take a count)")
        amount = float(match.group(1))
        count = float(match.group(2)) if match.group(2) else 1.0
        if amount <= 0 or count <= 0 or (whole and amount != int(amount)):
            kind = "a whole number above 0" if whole else "above 0"
            raise UsageError(f"{flag} {text!r}: the amount and the period must be {kind}",
                             hint=f"for example {flag} {example}")
        return cls(amount, count * PERIODS[unit], text.strip())


class Window:
    """What one key used within the last ``period``: (time, amount) entries, oldest first."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        self.entries: deque[tuple[float, float]] = deque()
        self.total = 0.0

    def _prune(self, now: float) -> None:
        while self.entries and self.entries[0][0] <= now - self.limit.period_s:
            self.total -= self.entries.popleft()[1]
        if not self.entries:
            self.total = 0.0

    def wait(self, now: float) -> float:
        """Seconds until the total is below the limit again (0: it is now)."""
        self._prune(now)
        if self.total < self.limit.amount:
            return 0.0
        left = self.total
        for at, amount in self.entries:
            left -= amount
            if left < self.limit.amount:
                return max(0.0, at + self.limit.period_s - now)
        return self.limit.period_s  # not reached: the entries sum to the total

    def add(self, now: float, amount: float) -> None:
        self._prune(now)
        self.entries.append((now, amount))
        self.total += amount


class LimitExceeded(ApiError):
    """429 with OpenAI's ``rate_limit_exceeded`` and the exact ``Retry-After`` (also in milliseconds,
    which the openai client reads first); ``reason``: ``rate_limit`` or ``audio_limit`` (the metrics')."""

    def __init__(self, message: str, wait: float, reason: str) -> None:
        seconds = max(1, math.ceil(wait))
        super().__init__(429, f"{message}; retry in {seconds} s", code="rate_limit_exceeded",
                         headers={"Retry-After": str(seconds),
                                  "retry-after-ms": str(max(1, math.ceil(wait * 1000)))})
        self.reason = reason
        self.retry_after = seconds


class Limits:
    """The windows of every key; ``clock``: a monotonic clock (tests may pass another)."""

    def __init__(self, rate: Limit | None = None, audio: Limit | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.audio = audio
        self.clock = clock
        self._lock = threading.Lock()
        self._rates: dict[str, Window] = {}
        self._audio: dict[str, Window] = {}

    @staticmethod
    def _id(principal: Principal) -> str:
        return principal.owner or principal.label

    def admit_request(self, principal: Principal) -> LimitExceeded | None:
        """Count one request of ``principal``, or the 429 that refuses it (not counted)."""
        if self.rate is None:
            return None
        with self._lock:
            window = self._rates.setdefault(self._id(principal), Window(self.rate))
            now = self.clock()
            wait = window.wait(now)
            if wait <= 0:
                window.add(now, 1.0)
                return None
        return LimitExceeded(f"key {principal.label!r} is over this server's rate limit of {self.rate.text} "
                             "requests", wait, "rate_limit")

    def check_audio(self, principal: Principal) -> LimitExceeded | None:
        """The 429 for a key whose synthesized audio has reached the audio limit, else None."""
        if self.audio is None:
            return None
        with self._lock:
            window = self._audio.get(self._id(principal))
            wait = window.wait(self.clock()) if window is not None else 0.0
            used = window.total if window is not None else 0.0
        if wait <= 0:
            return None
        return LimitExceeded(f"key {principal.label!r} has synthesized {used:.1f} s of audio, this server's "
                             f"limit of {self.audio.text} seconds", wait, "audio_limit")

    def add_audio(self, principal: Principal, seconds: float) -> None:
        if self.audio is None or seconds <= 0:
            return
        with self._lock:
            self._audio.setdefault(self._id(principal), Window(self.audio)).add(self.clock(), seconds)
