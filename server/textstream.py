"""Text streamed in, audio out sentence by sentence: what ``WS /v1/audio/speech/stream`` and Wyoming's
streaming synthesis share.

A :class:`TextStream` takes text as it arrives (an LLM's reply, delta by delta), cuts it at sentence
ends with the engine's chunker (``engine.text.stream``, as ``--text -`` does) and synthesizes each
sentence as soon as it is complete (a run of text longer than :data:`MAX_PIECE_CHARS` without a
sentence end is cut at a clause mark or between words, ``engine.text.chunking``, so that no piece is
minutes of audio), as a request of the model's batch (the same admission limits
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

from audiocpp.engine.records import AudioBuffer, TaskResult, VoiceReference, WordTiming
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.text.markup import is_ssml
from audiocpp.engine.text.stream import SentenceStream

from .errors import ApiError
from .scheduler import Cancelled, Job, as_asyncio
from .speech import SpeechPlan, observe

if TYPE_CHECKING:
    from .state import ServerState

#: Audio (seconds) a slow consumer may leave unread before its sentence is cancelled.
MAX_PENDING_SECONDS = 30.0
#: The longest first sentence whose audio becomes the reference of the rest.
MAX_CARRIED_SECONDS = 15.0
#: The longest piece of text spoken as one request (about 20 s of speech): longer sentences, or text
#: that runs on without a sentence end, are cut at clause marks, else between words.
MAX_PIECE_CHARS = 300


class TextStream:
    """The sentences of a text that arrives in pieces, each with the request that speaks it."""

    def __init__(self, plan: SpeechPlan) -> None:
        self.plan = plan
        self.cutter = SentenceStream()
        self.count = 0
        self.carried: tuple[AudioBuffer, str] | None = None

    def feed(self, text: str) -> list[str]:
        pieces = self._fit(self.cutter.feed(text))
        while (len(self.cutter.buffer) > 2 * MAX_PIECE_CHARS  # no sentence end in sight: cut the run
               and not is_ssml(self.cutter.buffer)):  # (an SSML document is whole: its structure says)
            cut = _run_cut(self.cutter.buffer, MAX_PIECE_CHARS)
            head, self.cutter.buffer = self.cutter.buffer[:cut], self.cutter.buffer[cut:]
            pieces += self._fit([" ".join(head.split())] if head.strip() else [])
        return pieces

    def finish(self) -> list[str]:
        return self._fit(self.cutter.finish())

    @staticmethod
    def _fit(sentences: list[str]) -> list[str]:
        """Sentences longer than MAX_PIECE_CHARS as several pieces (clause marks, else words)."""
        from audiocpp.engine.text.chunking import chunk_text

        out: list[str] = []
        for sentence in sentences:
            long = len(sentence) > MAX_PIECE_CHARS and not is_ssml(sentence)
            out.extend(chunk_text(sentence, MAX_PIECE_CHARS) if long else [sentence])
        return out

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


_CLAUSE_MARKS = ",;:，、；：—"


def _run_cut(buffer: str, limit: int) -> int:
    """Where to cut a run of text with no sentence end: after the last clause mark that is followed
    by a space within ``limit`` characters, else at the last space, else at ``limit``."""
    window = buffer[:limit + 1]
    for i in range(len(window) - 2, limit // 3, -1):
        if window[i] in _CLAUSE_MARKS and (window[i + 1].isspace() or window[i] in "，、；：—"):
            return i + 1
    space = window.rfind(" ", limit // 3)
    return space + 1 if space > 0 else limit


def sentence_plan(plan: SpeechPlan) -> SpeechPlan:
    """A plan whose pieces stream as 16-bit PCM (streaming mode where the family has it)."""
    from .encoding import FORMATS

    streaming = "streaming" in plan.served.model.spec.modes
    return dataclasses.replace(plan, fmt=FORMATS["pcm"], stream_format="audio",
                               mode=Mode.STREAMING if streaming else Mode.OFFLINE)


WordSink = Callable[[list[WordTiming]], Awaitable[Any]]


async def speak(state: ServerState, plan: SpeechPlan, send: Callable[[bytes], Awaitable[Any]],
                words: WordSink | None = None) -> tuple[TaskResult, float]:
    """Synthesize one planned sentence on the model's batch, sending its PCM pieces as they come
    (``plan.output_rate``), each after ``words(...)`` of the words it speaks where the family times
    them; returns its result and the seconds of audio sent (the pieces, without the offline file's
    cross-fades). Raises ApiError (a full queue: 429), Cancelled."""
    worker = state.workers[plan.served.name]
    plan = sentence_plan(plan)
    loop = asyncio.get_running_loop()
    job = Job(loop)
    limit = int(MAX_PENDING_SECONDS * plan.output_rate) * 2
    future = as_asyncio(worker.submit_speech(plan, job, state.voices, keep_audio=True))
    assert job.items is not None
    sent = 0
    getter: asyncio.Future | None = None
    try:
        while True:
            getter = asyncio.ensure_future(job.items.get())
            done, _ = await asyncio.wait({getter, future}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                while not job.items.empty():  # pieces put before the end are already queued
                    item = job.items.get_nowait()
                    await _words(words, item)
                    await send(item[1])
                    sent += len(item[1])
                break
            item = getter.result()
            data = item[1]
            await _words(words, item)
            await _send_watched(send, data, lambda sent=sent: job.emitted_bytes - sent > limit)
            sent += len(data)
        result, _ = future.result()
    except BaseException:
        job.cancel()
        raise
    finally:
        if getter is not None and not getter.done():
            getter.cancel()
    seconds = sent / 2 / plan.output_rate
    observe(state.metrics, plan, result, seconds)
    return result, seconds


async def _words(words: WordSink | None, item: tuple) -> None:
    """The words of a streamed piece (its fourth element), to ``words`` where there are some."""
    if words is not None and len(item) > 3 and item[3]:
        await words(item[3])


async def _send_watched(send: Callable[[bytes], Awaitable[Any]], data: bytes,
                        backlog: Callable[[], bool]) -> None:
    """``send(data)``, given up (an ApiError) while the audio waiting behind it grows past the bound."""
    task = asyncio.ensure_future(send(data))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.2)
            if done:
                task.result()
                return
            if backlog():
                raise ApiError(503, f"the client is not reading: more than {MAX_PENDING_SECONDS:g} s of "
                               "audio are waiting for it", code="slow_consumer")
    finally:
        if not task.done():
            task.cancel()
        else:  # retrieved, so that a send the client's disconnect broke logs nothing
            task.cancelled() or task.exception()


__all__ = ["Cancelled", "MAX_PENDING_SECONDS", "TextStream", "speak"]
