"""The jobs a front end is waiting on, so that Ctrl-C or SIGTERM cancels them: the one cancellation path
of the command line, as a leaving client's is the server's. The signal handler (cli/main.py) calls
:func:`cancel_watched` with a :class:`~.jobs.Cancelled` naming the signal; the main thread then unwinds
as before (removes what it had half written, exits with 128 + the signal's number)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .jobs import Cancelled, Job

_LOCK = threading.Lock()
_WATCHED: dict[int, Job] = {}


@contextmanager
def watched(job: Job) -> Iterator[Job]:
    """``job`` is cancelled by :func:`cancel_watched` while the block runs (and cancelled when the block
    ends early with an error: nobody reads it any more)."""
    watch(job)
    try:
        yield job
    except BaseException:
        job.cancel()
        raise
    finally:
        _forget(job)


def watch(job: Job) -> Job:
    """Watch ``job`` until it ends (for jobs whose waiting is spread over callbacks: a runner's queue)."""
    with _LOCK:
        _WATCHED[id(job)] = job
    job.add_done_callback(_forget)
    return job


def _forget(job: Job) -> None:
    with _LOCK:
        _WATCHED.pop(id(job), None)


def cancel_watched(why: Cancelled) -> int:
    """Cancel every watched job with ``why``; returns how many. Safe in a signal handler: it takes no lock
    that the interrupted main thread may hold (a snapshot of the jobs; a job's own cancel takes its
    executor's lock, which no main-thread code holds across a wait)."""
    jobs = list(_WATCHED.values())
    for job in jobs:
        job.cancel(why)
    return len(jobs)
