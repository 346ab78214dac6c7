"""Text streamed in, audio out sentence by sentence: what ``WS /v1/audio/speech/stream`` and Wyoming's
streaming synthesis share.

A :class:`TextStream` takes text as it arrives (an LLM's reply, delta by delta), cuts it at sentence
ends with the engine's chunker (``engine.text.stream``, as ``--text -`` does) and synthesizes each
sentence as soon as it is complete, as a request of the model's batch (the same admission limits
as ``POST /v1/audio/speech``). The voice stays the same across sentences: a stored or inline voice
clones every sentence; with the family's own voice (and no ``instructions``), the first sentence's
audio and text become the reference of the sentences after it, where the family clones.

:func:`speak` runs one sentence and hands its 16-bit PCM pieces to a coroutine as they come. A
consumer that does not read is not buffered without bound: past :data:`MAX_PENDING_SECONDS` of
audio waiting for it, the sentence is cancelled with an error.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from audiocpp.engine.records import AudioBuffer, TaskResult, VoiceReference
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.text.stream import SentenceStream

from .errors import ApiError
from .scheduler import Cancelled, Job
from .speech import SpeechPlan, synthesize

if TYPE_CHECKING:
    from .app import ServerState

#: Audio (seconds) a slow consumer may leave unread before its sentence is cancelled.
MAX_PENDING_SECONDS = 30.0
#: The longest first sentence whose audio becomes the reference of the rest.
MAX_CARRIED_SECONDS = 15.0


class TextStream:
    """The sentences of a text that arrives in pieces, each with the request that speaks it."""

    def __init__(self, plan: SpeechPlan) -> None:
        self.plan = plan
        self.cutter = SentenceStream()
        self.count = 0
        self.carried: tuple[AudioBuffer, str] | None = None

    def feed(self, text: str) -> list[str]:
        return self.cutter.feed(text)

    def finish(self) -> list[str]:
        return self.cutter.finish()

    @property
    def carries_voice(self) -> bool:
        """Whether the first sentence's audio will clone the rest (the family's own voice, a family
        that clones, no voice design asked for)."""
        plan = self.plan
        request = plan.request
        return (plan.voice is None and request.voice is None and request.voice_prompt is None
                and plan.task is Task.TTS and "clone" in plan.served.model.spec.tasks)

    def plan_for(self, sentence: str) -> SpeechPlan:
        """The request of one sentence: the session's, with its text (and the carried voice)."""
        request = dataclasses.replace(self.plan.request, text=sentence,
                                      options=dict(self.plan.request.options))
        task = self.plan.task
        if self.carried is not None:
            audio, text = self.carried
            request.voice, request.reference_text, task = VoiceReference(audio=audio), text, Task.CLONE
        return dataclasses.replace(self.plan, task=task, request=request)

    def spoke(self, sentence: str, result: TaskResult) -> None:
        """After a sentence: the first one's audio becomes the voice of the rest, where it can."""
        self.count += 1
        if self.count == 1 and self.carries_voice and 0 < result.audio.duration <= MAX_CARRIED_SECONDS:
            self.carried = (result.audio, sentence)


def sentence_plan(plan: SpeechPlan) -> SpeechPlan:
    """A plan whose pieces stream as 16-bit PCM (streaming mode where the family has it)."""
    from .encoding import FORMATS

    streaming = "streaming" in plan.served.model.spec.modes
    return dataclasses.replace(plan, fmt=FORMATS["pcm"], stream_format="audio",
                               mode=Mode.STREAMING if streaming else Mode.OFFLINE)


async def speak(state: ServerState, plan: SpeechPlan, send: Callable[[bytes], Awaitable[Any]]) -> TaskResult:
    """Synthesize one planned sentence on the model's batch, sending its PCM pieces as they come
    (``plan.output_rate``); returns its result. Raises ApiError (a full queue: 429), Cancelled."""
    worker = state.workers[plan.served.name]
    plan = sentence_plan(plan)
    loop = asyncio.get_running_loop()
    job = Job(loop)
    limit = int(MAX_PENDING_SECONDS * plan.output_rate) * 2
    future = asyncio.wrap_future(worker.submit(lambda j: synthesize(plan, j, worker, state.voices), job))
    assert job.items is not None
    sent = 0
    try:
        while True:
            getter = asyncio.ensure_future(job.items.get())
            done, _ = await asyncio.wait({getter, future}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                while not job.items.empty():  # pieces put before the end are already queued
                    await send(job.items.get_nowait()[1])
                break
            data = getter.result()[1]
            await _send_watched(send, data, lambda sent=sent: job.emitted_bytes - sent > limit)
            sent += len(data)
        result, _ = future.result()
    except BaseException:
        job.cancel()
        raise
    _observe(state, plan, result)
    return result


async def _send_watched(send: Callable[[bytes], Awaitable[Any]], data: bytes,
                        backlog: Callable[[], bool]) -> None:
    """``send(data)``, given up (an ApiError) while the audio waiting behind it grows past the bound."""
    task = asyncio.ensure_future(send(data))
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.2)
        if done:
            task.result()
            return
        if backlog():
            task.cancel()
            raise ApiError(503, f"the client is not reading: more than {MAX_PENDING_SECONDS:g} s of audio "
                           "are waiting for it", code="slow_consumer")


def _observe(state: ServerState, plan: SpeechPlan, result: TaskResult) -> None:
    m = result.metrics
    state.metrics.observe_synthesis(plan.served.name, m.audio_s, m.rtf if m.audio_s > 0 else None,
                                    m.time_to_first_audio_s)


__all__ = ["Cancelled", "MAX_PENDING_SECONDS", "TextStream", "speak"]
