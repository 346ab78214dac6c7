"""The one execution layer: every front end runs requests by submitting them to an executor and reading
the job it gets back (docs/architecture.md, "Execution").

- :mod:`.jobs`: :class:`Job` (events to a thread or to asyncio, result, cancel), :class:`Cancelled`,
  :class:`Busy` (back-pressure), and what every executor shares;
- :mod:`.loop`: :class:`BatchLoop`, the rows of one batch advanced together (one thread, no locks);
- :mod:`.local`: :class:`LocalExecutor`, in this process (``model.executor()``, ``run_batch``);
- :mod:`.processes`: ``ProcessExecutor``, worker processes each running a :class:`LocalExecutor`;
- :mod:`.watch`: the jobs a command waits on, cancelled by Ctrl-C and SIGTERM.

``LoadedModel.run_batch`` drives a :class:`BatchLoop` in the calling thread (no executor: torch's
thread-local state around it, a profiler, sees the batch's ops).
"""

from .jobs import Busy, Cancelled, Job, RowEvent
from .local import Admission, LocalExecutor
from .loop import BatchLoop, BatchResults

__all__ = ["Admission", "BatchLoop", "BatchResults", "Busy", "Cancelled", "Job", "LocalExecutor", "RowEvent"]
