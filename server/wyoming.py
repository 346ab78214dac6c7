"""The Wyoming protocol (Home Assistant's local voice services): ``audiocpp serve --wyoming-port N``.

A TCP server beside the HTTP one (``--no-http``: alone), sharing its models, stored voices,
admission limits and batcher. Per connection (the ``wyoming`` package's event handler):

- ``describe`` -> ``info``: one TTS program per served model (``audiocpp-<model>``), its voices (the
  family's own voice and every stored voice, with the spec's languages), and
  ``supports_synthesize_streaming``;
- ``synthesize`` (text, voice name, language) -> ``audio-start``, ``audio-chunk``s as the family
  produces them (16-bit mono PCM at the model's rate), ``audio-stop``;
- streaming (Wyoming 1.7+): ``synthesize-start`` (voice), ``synthesize-chunk``s (text pieces),
  ``synthesize-stop``: each sentence is spoken as soon as it is complete (``audio-start`` /
  ``-chunk`` / ``-stop`` per sentence, the same voice throughout, ``server.textstream``), then
  ``synthesize-stopped``; a ``synthesize`` sent alongside (clients send both for older servers) is
  ignored;
- errors (unknown voice, full queue, bad text) are ``error`` events; the connection stays usable.

Voices are named ``default`` and the stored voices' names when one model is served, ``<model>`` and
``<model>/<voice>`` when several are. Nothing the client sends names a file.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from audiocpp.engine.errors import AudiocppError

from .errors import ApiError, from_engine_error
from .scheduler import Cancelled
from .speech import SpeechPlan, parse_body, plan_speech
from .textstream import TextStream, speak

if TYPE_CHECKING:
    from .app import ServerState
    from .models import ServedModel

ATTRIBUTION = Attribution(name="audiocpp", url="https://github.com/0xShug0/audio.cpp")
WIDTH, CHANNELS = 2, 1


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("audiocpp")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return None


class Voices:
    """The Wyoming voice names of the served models and stored voices."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    @property
    def single(self) -> bool:
        return len(self.state.models) == 1

    def names(self, model: str) -> list[tuple[str, str | None]]:
        """(Wyoming name, stored voice or None) of ``model``'s voices."""
        served = self.state.models[model]
        stored = [v.name for v in self.state.voices.list()] if "clone" in served.model.spec.tasks else []
        if self.single:
            return [("default", None)] + [(name, name) for name in stored]
        return [(model, None)] + [(f"{model}/{name}", name) for name in stored]

    def resolve(self, name: str | None, language: str | None) -> tuple[ServedModel, str | None]:
        """The model and stored voice a ``synthesize`` names (None: the first model's own voice)."""
        models = self.state.models
        if not name:
            if language:  # the first model that speaks it
                for served in models.values():
                    if not served.model.spec.languages or language in served.model.spec.languages:
                        return served, None
            return next(iter(models.values())), None
        for model in models:
            for wyoming_name, stored in self.names(model):
                if wyoming_name == name:
                    return models[model], stored
        if "/" not in name and name in models:  # the model's name, on a one-model server too
            return models[name], None
        raise ApiError(400, f"voice {name!r} is not served here; describe lists the voices",
                       param="voice", code="voice_not_found")

    def info(self) -> Info:
        programs = []
        for model, served in self.state.models.items():
            spec = served.model.spec
            languages = list(spec.languages)
            voices = [TtsVoice(name=name, attribution=ATTRIBUTION, installed=True, version=None,
                               description=f"{spec.display_name}: " + (f"stored voice {stored}" if stored
                                                                       else "the family's own voice"),
                               languages=languages)
                      for name, stored in self.names(model)]
            programs.append(TtsProgram(name=f"audiocpp-{model}", attribution=ATTRIBUTION, installed=True,
                                       description=f"{spec.display_name} ({served.family}) on audiocpp",
                                       version=_version(), voices=voices, supports_synthesize_streaming=True))
        return Info(tts=programs)


class WyomingHandler(AsyncEventHandler):
    """One Wyoming connection."""

    def __init__(self, state: ServerState, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        super().__init__(reader, writer)
        self.state = state
        self.voices = Voices(state)
        self.stream: TextStream | None = None

    async def handle_event(self, event: Event) -> bool:
        try:
            if Describe.is_type(event.type):
                await self.write_event(self.voices.info().event())
            elif Synthesize.is_type(event.type):
                if self.stream is None:  # during a streaming synthesis it repeats the text: ignored
                    request = Synthesize.from_event(event)
                    voice = request.voice
                    plan = self._plan(voice.name if voice else None, voice.language if voice else None)
                    stream = TextStream(plan)
                    await self._say(stream, request.text)
            elif SynthesizeStart.is_type(event.type):
                voice = SynthesizeStart.from_event(event).voice
                self.stream = TextStream(self._plan(voice.name if voice else None,
                                                    voice.language if voice else None))
            elif SynthesizeChunk.is_type(event.type):
                if self.stream is None:
                    raise ApiError(400, "synthesize-chunk without synthesize-start", code="invalid_value")
                for sentence in self.stream.feed(SynthesizeChunk.from_event(event).text):
                    await self._sentence(self.stream, sentence)
            elif SynthesizeStop.is_type(event.type):
                stream, self.stream = self.stream, None
                if stream is not None:
                    for sentence in stream.finish():
                        await self._sentence(stream, sentence)
                await self.write_event(SynthesizeStopped().event())
        except Cancelled:
            return False
        except (ApiError, AudiocppError) as error:
            await self.write_event(_error_event(error))
        except (ConnectionError, asyncio.IncompleteReadError):
            return False
        except Exception as error:  # noqa: BLE001 - told to the client; the connection stays usable
            await self.write_event(Error(text=f"internal error: {type(error).__name__}: {error}",
                                         code="server_error").event())
        return True

    def _plan(self, name: str | None, language: str | None) -> SpeechPlan:
        served, stored = self.voices.resolve(name, language)
        spec = served.model.spec
        body: dict[str, Any] = {"model": served.name, "input": "-", "response_format": "pcm",
                                "sample_rate": "native"}
        if stored is not None:
            body["voice"] = stored
        if self.state.wyoming_seed is not None:
            body["seed"] = self.state.wyoming_seed
        if language and spec.option("request", "language") is not None and (
                not spec.languages or language in spec.languages):
            body["language"] = language
        return plan_speech(parse_body(body), self.state.models, self.state.voices, self.state.max_input_chars)

    async def _say(self, stream: TextStream, text: str) -> None:
        """A whole text, as one request (the family's own long-text handling, as a POST)."""
        if not text.strip():
            raise ApiError(400, "the text to synthesize is empty", code="empty_input")
        if len(text) > self.state.max_input_chars:
            raise ApiError(400, f"the text is {len(text)} characters long; this server takes at most "
                           f"{self.state.max_input_chars}", code="input_too_long")
        await self._audio(stream, text.strip())

    async def _sentence(self, stream: TextStream, sentence: str) -> None:
        """One sentence of a streaming synthesis: its own audio-start, chunks, audio-stop."""
        await self._audio(stream, sentence)

    async def _audio(self, stream: TextStream, sentence: str) -> None:
        """``audio-start`` with the first audio (a request refused or failing before it sends no
        audio events, only its error), the chunks, ``audio-stop``."""
        plan = stream.plan_for(sentence)
        rate = plan.output_rate
        started = False

        async def start() -> None:
            nonlocal started
            if not started:
                started = True
                await self.write_event(AudioStart(rate=rate, width=WIDTH, channels=CHANNELS).event())

        async def send(data: bytes) -> None:
            if data:
                await start()
                await self.write_event(AudioChunk(rate=rate, width=WIDTH, channels=CHANNELS,
                                                  audio=data).event())

        try:
            result = await speak(self.state, plan, send)
            await start()
        finally:
            if started:
                await self.write_event(AudioStop().event())
        stream.spoke(sentence, result)


def _error_event(error: BaseException) -> Event:
    if isinstance(error, AudiocppError):
        error = from_engine_error(error)
    assert isinstance(error, ApiError)
    return Error(text=error.message, code=error.code or "error").event()


async def start(state: ServerState, sock: socket.socket) -> asyncio.AbstractServer:
    """Serve Wyoming connections on ``sock`` in the running event loop."""

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await WyomingHandler(state, reader, writer).run()

    return await asyncio.start_server(connected, sock=sock)
