"""The one execution layer: every front end runs requests by submitting them to an executor and reading
the job it gets back (docs/architecture.md, "Execution").

- :mod:`.jobs`: :class:`Job` (events to a thread or to asyncio, result, cancel), :class:`Cancelled`,
  :class:`Busy` (the queue is full: back-pressure, the same everywhere);
- :mod:`.loop`: :class:`BatchLoop`, the rows of one batch advanced together (one thread, no locks);
- :mod:`.local`: :class:`LocalExecutor`, in this process: requests join the running batch at its next
  step (``model.executor()``), with its :class:`Admission` policy;
- :mod:`.processes`: :class:`~.processes.ProcessExecutor`, worker processes each running a
  :class:`LocalExecutor` on its own copy of the model (``audiocpp batch``'s local workers);
- :mod:`.watch`: the jobs a command waits on, cancelled by Ctrl-C and SIGTERM (the one cancellation
  path of the command line);
- :mod:`.batches`: :func:`run_rows` / :func:`stream_rows`, many requests as one batch, waited for
  together (``run_batch`` / ``stream_batch``);
- :mod:`.inline`: ``run_here`` / ``stream_here``, a batch run by the calling thread (tools that need
  torch's thread-local state around a synthesis: a dispatch mode counting ops, a profiler).
"""

from .batches import run_rows, stream_rows
from .jobs import Busy, Cancelled, Job, RowEvent
from .local import Admission, LocalExecutor
from .loop import BatchLoop, BatchResults

__all__ = ["Admission", "BatchLoop", "BatchResults", "Busy", "Cancelled", "Job", "LocalExecutor", "RowEvent",
           "run_rows", "stream_rows"]
