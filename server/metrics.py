"""Server metrics in the Prometheus text format (no client library: a few counters, gauges and
two histograms, updated from the event loop and the executors' threads under one lock)."""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

#: One series beyond the tables: name, type, help, and (labels, value) rows.
Series = tuple[str, str, str, Iterable[tuple[dict[str, str], float]]]

RTF_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.count += 1


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def resident_bytes() -> int:
    """This process's current resident set size (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


#: The tables of ServerMetrics that sum across processes (a Ray Serve app's replicas): counters...
COUNTERS = ("requests", "rejected", "cancelled", "audio_seconds", "key_requests", "key_audio", "key_rejected",
            "auth_failures")
#: ... and histograms (per model).
HISTOGRAMS = ("rtf", "first_audio", "batch_size", "join_wait")


class ServerMetrics:
    """Counters keyed by labels; gauges are read from callbacks when scraped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)  # (endpoint, model, status)
        self.rejected: dict[str, int] = defaultdict(int)
        self.cancelled: dict[str, int] = defaultdict(int)
        self.audio_seconds: dict[str, float] = defaultdict(float)
        self.rtf: dict[str, Histogram] = {}
        self.first_audio: dict[str, Histogram] = {}
        self.batch_size: dict[str, Histogram] = {}
        self.join_wait: dict[str, Histogram] = {}
        self.gauges: list[tuple[str, str, Callable[[], dict[str, float]]]] = []
        # per API key: by its label, never the key
        self.key_requests: dict[tuple[str, str], int] = defaultdict(int)  # (label, status)
        self.key_audio: dict[str, float] = defaultdict(float)
        self.key_rejected: dict[tuple[str, str], int] = defaultdict(int)  # (label, reason)
        self.auth_failures: dict[str, int] = defaultdict(int)  # reason: missing, malformed, invalid

    def count_request(self, endpoint: str, model: str, status: int) -> None:
        with self._lock:
            self.requests[(endpoint, model, str(status))] += 1
            if status == 429 or status == 503:
                self.rejected[model] += 1

    def count_cancelled(self, model: str) -> None:
        with self._lock:
            self.cancelled[model] += 1

    def observe_synthesis(self, model: str, audio_s: float, rtf: float | None,
                          first_audio_s: float | None) -> None:
        with self._lock:
            self.audio_seconds[model] += audio_s
            if rtf is not None:
                self.rtf.setdefault(model, Histogram(RTF_BUCKETS)).observe(rtf)
            if first_audio_s is not None:
                self.first_audio.setdefault(model, Histogram(LATENCY_BUCKETS)).observe(first_audio_s)

    def observe_batch(self, model: str, size: int) -> None:
        """One batched call of ``size`` requests (rows)."""
        with self._lock:
            self.batch_size.setdefault(model, Histogram(BATCH_BUCKETS)).observe(size)

    def observe_join_wait(self, model: str, seconds: float) -> None:
        """How long a request waited before joining the batch."""
        with self._lock:
            self.join_wait.setdefault(model, Histogram(WAIT_BUCKETS)).observe(seconds)

    def count_key_request(self, label: str, status: int, rejected: str | None = None) -> None:
        """A request of the key labelled ``label``; ``rejected``: why it was refused with 429
        (``rate_limit``, ``audio_limit``, ``queue``)."""
        with self._lock:
            self.key_requests[(label, str(status))] += 1
            if rejected is not None:
                self.key_rejected[(label, rejected)] += 1

    def add_key_audio(self, label: str, seconds: float) -> None:
        with self._lock:
            self.key_audio[label] += seconds

    def count_auth_failure(self, reason: str) -> None:
        with self._lock:
            self.auth_failures[reason] += 1

    def snapshot(self) -> dict[str, dict]:
        """The counters and histograms as plain data (sent from a Ray Serve replica to the ingress)."""
        with self._lock:
            out: dict[str, dict] = {name: dict(getattr(self, name)) for name in COUNTERS}
            for name in HISTOGRAMS:
                out[name] = {model: (h.buckets, list(h.counts), h.total, h.count)
                             for model, h in getattr(self, name).items()}
        return out

    def merge(self, snapshot: dict[str, dict]) -> None:
        """Add another process's :meth:`snapshot` to these counters and histograms."""
        with self._lock:
            for name in COUNTERS:
                table = getattr(self, name)
                for key, value in snapshot.get(name, {}).items():
                    table[tuple(key) if isinstance(key, list) else key] += value
            for name in HISTOGRAMS:
                table = getattr(self, name)
                for model, (buckets, counts, total, count) in snapshot.get(name, {}).items():
                    hist = table.setdefault(model, Histogram(tuple(buckets)))
                    hist.counts = [a + b for a, b in zip(hist.counts, counts)]
                    hist.total += total
                    hist.count += count

    async def refresh(self) -> None:
        """Called before each scrape: a Ray Serve ingress gathers its replicas' figures here."""

    def add_gauge(self, name: str, help_text: str, read: Callable[[], dict[str, float]]) -> None:
        """A gauge per model, read when scraped: ``read()`` gives model -> value."""
        self.gauges.append((name, help_text, read))

    def render(self, extra: Iterable[Series] = ()) -> str:
        """The Prometheus text; ``extra``: series of the caller's (a Ray Serve ingress's replicas)."""
        out: list[str] = []

        def header(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")

        with self._lock:
            header("audiocpp_requests_total", "counter", "HTTP requests by endpoint, model and status code.")
            for (endpoint, model, status), n in sorted(self.requests.items()):
                out.append(
                    f"audiocpp_requests_total{_labels(endpoint=endpoint, model=model, status=status)} {n}")
            errors: dict[tuple[str, str], int] = defaultdict(int)
            for (endpoint, model, status), n in self.requests.items():
                if int(status) >= 400:
                    errors[(endpoint, model)] += n
            header("audiocpp_request_errors_total", "counter", "Requests answered with a 4xx or 5xx status.")
            for (endpoint, model), n in sorted(errors.items()):
                out.append(f"audiocpp_request_errors_total{_labels(endpoint=endpoint, model=model)} {n}")
            header("audiocpp_key_requests_total", "counter",
                   "Requests to /v1 by API key label (never the key) and status code.")
            for (label, status), n in sorted(self.key_requests.items()):
                out.append(f"audiocpp_key_requests_total{_labels(key=label, status=status)} {n}")
            header("audiocpp_key_rejected_total", "counter",
                   "Requests refused with 429 by API key label and reason (rate_limit, audio_limit, queue).")
            for (label, reason), n in sorted(self.key_rejected.items()):
                out.append(f"audiocpp_key_rejected_total{_labels(key=label, reason=reason)} {n}")
            header("audiocpp_key_audio_seconds_total", "counter", "Seconds of audio sent, by API key label.")
            for label, secs in sorted(self.key_audio.items()):
                out.append(f"audiocpp_key_audio_seconds_total{_labels(key=label)} {secs:.6f}")
            header("audiocpp_auth_failures_total", "counter",
                   "Requests refused with 401, by reason (missing, malformed, invalid key).")
            for reason, n in sorted(self.auth_failures.items()):
                out.append(f"audiocpp_auth_failures_total{_labels(reason=reason)} {n}")
            header("audiocpp_rejected_total", "counter",
                   "Requests refused at once because the queue was full.")
            for model, n in sorted(self.rejected.items()):
                out.append(f"audiocpp_rejected_total{_labels(model=model)} {n}")
            header("audiocpp_cancelled_total", "counter", "Syntheses stopped because the client went away.")
            for model, n in sorted(self.cancelled.items()):
                out.append(f"audiocpp_cancelled_total{_labels(model=model)} {n}")
            header("audiocpp_audio_seconds_total", "counter", "Seconds of audio synthesized.")
            for model, secs in sorted(self.audio_seconds.items()):
                out.append(f"audiocpp_audio_seconds_total{_labels(model=model)} {secs:.6f}")
            for name, help_text, table in (
                ("audiocpp_rtf", "Real-time factor (wall / audio seconds) of each synthesis.", self.rtf),
                ("audiocpp_first_audio_seconds", "Seconds from the start of synthesis to its first audio.",
                 self.first_audio),
                ("audiocpp_batch_size", "Requests (rows) in each batched forward call.", self.batch_size),
                ("audiocpp_batch_wait_seconds", "Seconds a request waited before joining the model's batch.",
                 self.join_wait),
            ):
                header(name, "histogram", help_text)
                for model, hist in sorted(table.items()):
                    for bound, n in zip(hist.buckets, hist.counts):
                        out.append(f"{name}_bucket{_labels(model=model, le=f'{bound:g}')} {n}")
                    out.append(f"{name}_bucket{_labels(model=model, le='+Inf')} {hist.count}")
                    out.append(f"{name}_sum{_labels(model=model)} {hist.total:.6f}")
                    out.append(f"{name}_count{_labels(model=model)} {hist.count}")
        for name, help_text, read in self.gauges:
            header(name, "gauge", help_text)
            for model, value in sorted(read().items()):
                out.append(f"{name}{_labels(model=model)} {value:g}")
        for name, kind, help_text, rows in extra:
            header(name, kind, help_text)
            out.extend(f"{name}{_labels(**labels)} {value:g}" for labels, value in rows)
        header("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
        out.append(f"process_resident_memory_bytes {resident_bytes()}")
        header("process_start_time_seconds", "gauge",
               "Start time of the process since the epoch, in seconds.")
        out.append(f"process_start_time_seconds {self.started:.3f}")
        return "\n".join(out) + "\n"
