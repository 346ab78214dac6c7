"""The Wyoming protocol (Home Assistant's local voice services): ``audiocpp serve --wyoming-port N``.

A TCP server beside the HTTP one (``--no-http``: alone), sharing its models, stored voices,
admission limits and batcher. Per connection (the ``wyoming`` package's event handler):

- ``describe`` -> ``info``: one TTS program, ``audiocpp``, whose voices are every served model's
  (Home Assistant uses only the first program of a server, so each model is reached through its
  voices), each with the model's languages (the most common first, no "auto"), and
  ``supports_synthesize_streaming``;
- ``synthesize`` (text, voice name, language) -> ``audio-start``, ``audio-chunk``s as the family
  produces them (16-bit mono PCM at the model's rate), ``audio-stop``;
- streaming (Wyoming 1.7+): ``synthesize-start`` (voice), ``synthesize-chunk``s (text pieces),
  ``synthesize-stop``: each sentence is spoken as soon as it is complete (``audio-start`` /
  ``-chunk`` / ``-stop`` per sentence, the same voice throughout, ``server.textstream``), then
  ``synthesize-stopped``; a ``synthesize`` sent alongside (clients send both for older servers) is
  ignored;
- an error (unknown voice, language, full queue, bad text, a failing sentence) is one ``error`` event
  saying what failed; then, as wyoming-piper does, the exchange the client waits for is finished
  (``synthesize-stopped`` for a stream) and the connection is closed. Home Assistant reads until
  ``audio-stop``, ``synthesize-stopped`` or a closed connection and ignores ``error``: it must never be
  left waiting.

Voices are named ``default``, the model's named voices (Kokoro's ``jf_alpha``..., each with its own
language) and the stored voices' names when one model is served, ``<model>`` and ``<model>/<voice>`` when
several are (a synthesize may name the model itself either way); a stored voice is offered for the
models that can clone with it. A synthesize may also name what ``POST /v1/audio/speech`` takes as a voice
of a model with named voices (a mix ``jf_alpha(2)+jm_kumo(1)``, OpenAI's names), as ``<model>/<voice>``
when several models are served. Where the ``zeroconf`` package is installed
and Wyoming listens on an address other machines reach, the service is advertised as
``_wyoming._tcp`` (Home Assistant discovers it). Nothing the client sends names a file.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from audiocpp.engine.errors import AudiocppError

from .audit import client_address
from .auth import WYOMING
from .errors import ApiError, from_engine_error
from .scheduler import Cancelled
from .speech import SpeechPlan, parse_body, plan_speech, request_language
from .textstream import TextStream, speak

if TYPE_CHECKING:
    from .served_models import ServedModel
    from .state import ServerState

ATTRIBUTION = Attribution(name="audiocpp", url="https://github.com/0xShug0/audio.cpp")
WIDTH, CHANNELS = 2, 1
ENDPOINT = "wyoming"
PROGRAM = "audiocpp"
SERVICE_TYPE = "_wyoming._tcp.local."
log = logging.getLogger("uvicorn.error")


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
        """(Wyoming name, the voice a request names or None) of ``model``'s voices: its own voice, its
        named voices, and the stored voices it clones with."""
        served = self.state.models[model]
        named = [str(v["name"]) for v in served.named_voices()]
        stored = [v.name for v in self.state.view(WYOMING).list() if served.clones_with(v.transcript)]
        voices = named + [name for name in stored if name not in named]
        if self.single:
            return [("default", None)] + [(name, name) for name in voices]
        return [(model, None)] + [(f"{model}/{name}", name) for name in voices]

    def resolve(self, name: str | None, language: str | None) -> tuple[ServedModel, str | None]:
        """The model and voice (a named or stored voice's name, as a request's ``voice``) a ``synthesize``
        names (no name: the first model that speaks ``language``, else the first model's own voice)."""
        models = self.state.models
        if not name:
            if language:
                for served in models.values():
                    try:
                        request_language(served, language)
                    except (ApiError, AudiocppError):
                        continue
                    return served, None
            return next(iter(models.values())), None
        for model in models:
            for wyoming_name, stored in self.names(model):
                if wyoming_name == name:
                    return models[model], stored
        if "/" not in name and name in models:  # the model's name, on a one-model server too
            return models[name], None
        model, slash, voice = name.partition("/")
        if slash and model in models and models[model].named_voices():
            return models[model], voice  # a mix, an OpenAI name: checked as over HTTP
        first = next(iter(models.values()))
        if self.single and first.named_voices():
            return first, name
        listed = [n for model in models for n, _ in self.names(model)]
        raise ApiError(400, f"voice {name!r} is not served here; its voices: {', '.join(listed)}",
                       param="voice", code="voice_not_found")

    def info(self) -> Info:
        voices = []
        for model, served in self.state.models.items():
            spec = served.model.spec
            languages = served.languages()
            named = {str(v["name"]): v for v in served.named_voices()}
            for name, voice in self.names(model):
                if voice in named:
                    about = named[voice]
                    what = ", ".join(str(about[k]) for k in ("language_name", "gender") if about.get(k))
                    what = f"voice {voice}" + (f" ({what})" if what else "")
                    spoken = [str(about["language"])] if about.get("language") else languages
                else:
                    what, spoken = (f"stored voice {voice}" if voice else "its own voice"), languages
                voices.append(TtsVoice(name=name, attribution=ATTRIBUTION, installed=True, version=None,
                                       description=f"{spec.display_name} ({model}): {what}",
                                       languages=spoken))
        described = ", ".join(f"{name} ({served.model.spec.display_name})"
                              for name, served in self.state.models.items())
        program = TtsProgram(name=PROGRAM, attribution=ATTRIBUTION, installed=True,
                             description=f"audiocpp: {described}", version=_version(), voices=voices,
                             supports_synthesize_streaming=True)
        return Info(tts=[program])


class WyomingHandler(AsyncEventHandler):
    """One Wyoming connection."""

    def __init__(self, state: ServerState, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        super().__init__(reader, writer)
        self.state = state
        self.voices = Voices(state)
        self.stream: TextStream | None = None
        self.streaming = False  # a synthesize-start came: the client waits for synthesize-stopped
        self.model = ""  # the metrics' label of the exchange
        self.exchange: dict[str, Any] = {}  # the exchange's audit record (--access-log)
        self.client = client_address(writer.get_extra_info("peername"))

    async def handle_event(self, event: Event) -> bool:
        try:
            if Describe.is_type(event.type):
                await self.write_event(self.voices.info().event())
            elif Synthesize.is_type(event.type):
                if not self.streaming:  # during a streaming synthesis it repeats the text: ignored
                    self._begin()
                    request = Synthesize.from_event(event)
                    voice = request.voice
                    stream = TextStream(self._plan(voice.name if voice else None,
                                                   voice.language if voice else None))
                    await self._say(stream, request.text)
                    self._count(200)
            elif SynthesizeStart.is_type(event.type):
                self._begin()
                self.streaming = True
                voice = SynthesizeStart.from_event(event).voice
                self.stream = TextStream(self._plan(voice.name if voice else None,
                                                    voice.language if voice else None))
            elif SynthesizeChunk.is_type(event.type):
                self.streaming = True
                if self.stream is None:
                    raise ApiError(400, "synthesize-chunk came without synthesize-start",
                                   code="invalid_value")
                for sentence in self.stream.feed(SynthesizeChunk.from_event(event).text):
                    await self._audio(self.stream, sentence)
            elif SynthesizeStop.is_type(event.type):
                stream, self.stream = self.stream, None
                for sentence in stream.finish() if stream is not None else []:
                    await self._audio(stream, sentence)
                self.streaming = False
                await self.write_event(SynthesizeStopped().event())
                self._count(200)
        except (Cancelled, ConnectionError, asyncio.IncompleteReadError, OSError) as error:
            log.info("Wyoming: the client went away (%s)", type(error).__name__)
            self._count(499)
            return False
        except Exception as error:  # noqa: BLE001 - told to the client, then the exchange ends
            return await self._fail(error)
        return True

    async def _fail(self, error: Exception) -> bool:
        """One ``error`` event saying what failed; ``synthesize-stopped`` where the client streams (Home
        Assistant ignores errors and reads until it); then the connection closes (False)."""
        if isinstance(error, AudiocppError):
            error = from_engine_error(error)
        if isinstance(error, ApiError):
            status, event = error.status, Error(text=error.message, code=error.code or "error").event()
        else:
            status = 500
            text = f"internal error: {type(error).__name__}: {error}"
            print(f"audiocpp serve: Wyoming: {text}", file=sys.stderr)
            event = Error(text=text, code="server_error").event()
        streaming = self.streaming
        self._count(status)
        try:
            await self.write_event(event)
            if streaming:
                await self.write_event(SynthesizeStopped().event())
            await self._finish()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        return False

    async def _finish(self, timeout: float = 2.0) -> None:
        """End our side (the client reads to the end of the stream, then disconnects) and read what the
        client still sends (a stream's remaining chunks) until it does: closing with unread data would
        reset the connection and could lose the events just written."""
        if self.writer.can_write_eof():
            self.writer.write_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            try:
                if not await asyncio.wait_for(self.reader.read(1 << 16), timeout=left):
                    return
            except asyncio.TimeoutError:
                return

    def _begin(self) -> None:
        self.exchange = {"started": time.perf_counter(), "chars": 0, "audio_s": 0.0, "text": None}

    def _count(self, status: int) -> None:
        self.state.metrics.count_request(ENDPOINT, self.model, status)
        self.streaming = False  # the exchange is over
        record = self.exchange
        self.exchange = {}
        if self.state.logs_requests:
            started = record.get("started", time.perf_counter())
            self.state.log_request({
                "time": time.time(), "key": None, "client": self.client, "protocol": "wyoming",
                "method": None, "route": ENDPOINT, "model": self.model or None,
                "voice": record.get("voice"), "clone": record.get("clone"),
                "chars": record.get("chars"), "audio_s": record.get("audio_s"), "status": status,
                "text": record.get("text"), "latency_ms": round((time.perf_counter() - started) * 1000, 1)})

    async def disconnect(self) -> None:
        """The connection ended: a stream still open was left by its client (499)."""
        if self.streaming:
            log.info("Wyoming: the client went away during a streaming synthesis")
            self._count(499)

    def _plan(self, name: str | None, language: str | None) -> SpeechPlan:
        served, voice = self.voices.resolve(name, language)
        self.model = served.name
        body: dict[str, Any] = {"model": served.name, "input": "-", "response_format": "pcm",
                                "sample_rate": "native"}
        if voice is not None:
            body["voice"] = voice  # a named or stored voice: checked as over HTTP (named_voices)
        if self.state.wyoming_seed is not None:
            body["seed"] = self.state.wyoming_seed
        if language:
            body["language"] = language  # checked as over HTTP (speech.request_language)
        plan = plan_speech(parse_body(body), self.state.models, self.state.view(WYOMING),
                           self.state.max_input_chars, WYOMING)
        self.exchange.update(voice=plan.voice_name, clone=plan.task.value == "clone")
        return plan

    async def _say(self, stream: TextStream, text: str) -> None:
        """A whole text, as one request (the family's own long-text handling, as a POST)."""
        if not text.strip():
            raise ApiError(400, "the text to synthesize is empty", code="empty_input")
        if len(text) > self.state.max_input_chars:
            raise ApiError(400, f"the text is {len(text)} characters long; this server takes at most "
                           f"{self.state.max_input_chars}", code="input_too_long")
        await self._audio(stream, text.strip())

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

        if self.exchange:
            self.exchange["chars"] += len(sentence)
            text = self.exchange["text"]
            self.exchange["text"] = sentence if text is None else f"{text} {sentence}"
        result, seconds = await speak(self.state, plan, send)
        if self.exchange:
            self.exchange["audio_s"] += seconds
        await start()
        await self.write_event(AudioStop().event())
        stream.spoke(sentence, result)


class WyomingServer:
    """The Wyoming TCP server and its zeroconf advertisement (withdrawn by :meth:`aclose`)."""

    def __init__(self, server: asyncio.AbstractServer, advertised: asyncio.Future) -> None:
        self.server = server
        self.advertised = advertised

    async def aclose(self) -> None:
        self.server.close()
        if not self.advertised.done():
            self.advertised.cancel()
        try:
            withdraw = await self.advertised
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - nothing was advertised
            return
        if withdraw is not None:
            await withdraw()


async def start(state: ServerState, sock: socket.socket) -> WyomingServer:
    """Serve Wyoming connections on ``sock`` in the running event loop, advertised over zeroconf
    where it can be (:func:`advertise`, in the background)."""

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await WyomingHandler(state, reader, writer).run()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):  # the client went away
            pass

    server = await asyncio.start_server(connected, sock=sock)
    return WyomingServer(server, asyncio.ensure_future(advertise(sock)))


async def advertise(sock: socket.socket) -> Any:
    """Register the Wyoming service over zeroconf (mDNS, ``_wyoming._tcp``), as wyoming-piper does,
    where the ``zeroconf`` package is installed and the address is one other machines reach (not a
    loopback address). Returns the coroutine function that withdraws it, or None."""
    host, port = sock.getsockname()[:2]
    try:
        from zeroconf import IPVersion
        from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf
    except ImportError:
        print("audiocpp serve: Wyoming is not advertised to Home Assistant (pip install zeroconf for "
              "discovery); add it by host and port", file=sys.stderr)
        return None
    address = _reachable_address(host)
    if address is None:
        print(f"audiocpp serve: Wyoming listens on {host} only, so it is not advertised over zeroconf; "
              "use --host 0.0.0.0 where Home Assistant runs on another machine or in a container",
              file=sys.stderr)
        return None
    name = f"audiocpp-{socket.gethostname().split('.')[0]}-{port}"
    info = AsyncServiceInfo(SERVICE_TYPE, f"{name}.{SERVICE_TYPE}", addresses=[socket.inet_aton(address)],
                            port=port, properties={"program": PROGRAM},
                            server=f"{socket.gethostname().split('.')[0]}.local.")
    zc = AsyncZeroconf(ip_version=IPVersion.V4Only)
    try:
        await zc.async_register_service(info, allow_name_change=True)
    except Exception as error:  # noqa: BLE001 - discovery is a convenience: say so and serve on
        await zc.async_close()
        print(f"audiocpp serve: zeroconf advertisement failed ({type(error).__name__}: {error}); "
              "add Wyoming in Home Assistant by host and port", file=sys.stderr)
        return None
    print(f"audiocpp serve: Wyoming advertised over zeroconf as {info.name} ({address}:{port})",
          file=sys.stderr)

    async def withdraw() -> None:
        try:
            await zc.async_unregister_service(info)
        finally:
            await zc.async_close()

    return withdraw


def _reachable_address(host: str) -> str | None:
    """The IPv4 address to advertise for a socket bound to ``host``: itself, or for a wildcard the
    address of the interface that reaches the local network; None for loopback (or none found)."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if ip.version != 4 or ip.is_loopback:
        return None
    if not ip.is_unspecified:
        return host
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("224.0.0.251", 5353))  # the mDNS group: no packet is sent, a route is chosen
        found = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if ipaddress.ip_address(found).is_loopback else found


__all__ = ["Voices", "WyomingHandler", "WyomingServer", "advertise", "start"]
