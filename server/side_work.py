"""The server's side work: what runs off the event loop besides the model (encoding a whole file,
resampling it, decoding an upload, the voice store, phonemizing).

It runs on one small pool of threads (:func:`side_threads`: from 2 to 8, by the machine's cores), the
event loop's default executor, so ``asyncio.to_thread`` uses it. Each of its threads computes with one
torch thread: torch keeps a team of intra-op threads per thread that runs a parallel op (one per core),
so asyncio's own pool (up to 32 threads) and AnyIO's (up to 40) each resampling a response would hold
hundreds of threads on a large machine, all competing with the batch. One torch thread gives the same
bytes (the resampler's convolution splits its work, not its sums).
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor


def side_threads() -> int:
    """How many side threads a server runs: its cores, from 2 to 8."""
    return max(2, min(8, os.cpu_count() or 2))


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)


def use_side_pool(loop: asyncio.AbstractEventLoop) -> ThreadPoolExecutor:
    """Make the side pool ``loop``'s default executor (shut down with the loop)."""
    pool = ThreadPoolExecutor(side_threads(), thread_name_prefix="audiocpp-side",
                              initializer=_one_torch_thread)
    loop.set_default_executor(pool)
    return pool
