"""The row program of a request whose text holds pauses or SSML (``PreparedRequest.script``,
engine/text/markup.py): each speech part runs through the family's own ``_synthesize`` as a request of
its own (same options, voice and seed), the silences are spliced between them.

Every family gets pauses this way, in every front end (CLI, server, WebSocket, batch, book), in a batch
too: a part's ops are the family's ops. Streaming yields the parts' pieces as the family streams them
and each silence as a piece of its own, so the streamed pieces join into the final audio exactly; word
timings (Kokoro) are moved to where their part lies in the whole.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

import numpy as np

from .records import AudioBuffer, AudioPiece, PreparedRequest, Synthesis, WordTiming
from .text.markup import Pause

RowProgram = Generator[Any, Any, Synthesis]


def run_script(synthesize: Callable[[PreparedRequest], RowProgram], request: PreparedRequest,
               sample_rate: int) -> RowProgram:
    """``request.script`` part by part through ``synthesize``: the whole audio, its parts (speech and
    silence, in order) as ``chunks``, word timings over the whole, each part's details."""
    assert request.script is not None
    parts: list[AudioBuffer] = []
    words: list[WordTiming] = []
    details: list[dict[str, Any]] = []
    voice_prompt = None
    offset = 0.0
    for part in request.script:
        if isinstance(part, Pause):
            silence = AudioBuffer(np.zeros(round(part.seconds * sample_rate), np.float32), sample_rate)
            if request.streaming:
                yield silence
            parts.append(silence)
            offset += silence.duration
            continue
        program = synthesize(replace(request, text=part.text, script=None))
        synthesis, streamed = yield from _shifted(program, offset)
        if request.streaming and not streamed and synthesis.audio.num_samples:  # it streamed nothing
            yield AudioPiece(synthesis.audio, [w.shifted(offset) for w in synthesis.words])
            streamed = [synthesis.audio]
        parts.extend(streamed if request.streaming else [synthesis.audio])
        words += [w.shifted(offset) for w in synthesis.words]
        details.append({"text": part.text, **synthesis.details})
        voice_prompt = voice_prompt or synthesis.voice_prompt
        offset += synthesis.audio.duration
    samples = np.concatenate([p.samples for p in parts]) if parts else np.zeros(0, np.float32)
    return Synthesis(audio=AudioBuffer(samples, sample_rate), chunks=parts, voice_prompt=voice_prompt,
                     details={"script": [_described(p) for p in request.script], "parts": details},
                     words=words)


def _shifted(program: RowProgram, offset: float) -> Generator[Any, Any, tuple[Synthesis, list[AudioBuffer]]]:
    """``yield from program``, with the words of its streamed pieces moved by ``offset`` seconds; returns
    its Synthesis and the audio of the pieces it streamed."""
    streamed: list[AudioBuffer] = []
    send = None
    try:
        while True:
            try:
                item = program.send(send)
            except StopIteration as stop:
                return stop.value, streamed
            if isinstance(item, AudioPiece):
                streamed.append(item.audio)
                item = AudioPiece(item.audio, [w.shifted(offset) for w in item.words])
            elif isinstance(item, AudioBuffer):
                streamed.append(item)
            send = yield item
    finally:
        program.close()


def _described(part: object) -> dict[str, Any]:
    if isinstance(part, Pause):
        return {"pause_s": part.seconds}
    return {"text": getattr(part, "text", "")}
