"""``POST /v1/audio/speech``: OpenAI's request body -> an engine request, and its synthesis.

The body is OpenAI's (``model``, ``input``, ``voice``, ``instructions``, ``response_format``,
``speed``, ``stream_format``; Kokoro-FastAPI's ``stream: true`` means ``stream_format: "audio"``) plus
our extensions: ``language``, ``seed``, ``reference_text``, ``timestamps`` (word timings as SSE events,
``speech.audio.timestamps``, on a model that times words),
``sample_rate`` (the output rate: a number, or ``"native"`` for the model's; by default ``pcm``
and SSE deltas are 24 kHz, as OpenAI's are, and the other formats the model's rate), ``ref_audio``
with ``ref_text`` (an inline reference to clone: base64 bytes or a ``data:audio/...;base64,`` URL,
checked as voice uploads are), and any request option of the model's spec, at the top level or in
``options``. Options are typed and checked by the engine's own parser (``resolve_options``),
before the request is queued, so a bad one is a 400 at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.records import AudioBuffer, StreamEvent, TaskRequest, TaskResult, VoiceReference
from audiocpp.engine.tasks import Mode, Task

from .auth import ANONYMOUS, Principal
from .encoding import AudioFormat, check_format, encode, pcm16
from .errors import ApiError, from_engine_error
from .named_voices import choose_voice
from .served_models import PATH_TYPES, ServedModel
from .voices import StoredVoice, VoiceStore, VoiceView

if TYPE_CHECKING:
    from .scheduler import Job

#: OpenAI's model names: they mean the server's first model, so unmodified clients work.
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-tts")


class SpeechBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = None
    input: StrictStr
    voice: StrictStr | dict[str, Any] | None = None
    instructions: StrictStr | None = None
    response_format: StrictStr | None = None  # wav, or pcm with stream_format sse
    speed: float | None = None
    stream_format: Literal["audio", "sse"] | None = None
    stream: StrictBool | None = None  # Kokoro-FastAPI's: true means stream_format "audio"
    language: StrictStr | None = None
    seed: int | None = None
    reference_text: StrictStr | None = None
    sample_rate: int | str | None = None  # Hz, or "native" (checked by output_rate)
    ref_audio: StrictStr | None = None
    ref_text: StrictStr | None = None
    timestamps: StrictBool | None = None  # word timings as SSE events (stream_format sse)
    options: dict[str, Any] | None = None


@dataclass
class SpeechPlan:
    """A checked request, ready to queue."""

    served: ServedModel
    task: Task
    mode: Mode
    request: TaskRequest
    fmt: AudioFormat
    stream_format: str | None
    voice: StoredVoice | None = None
    prompt_options: dict[str, Any] = field(default_factory=dict)
    rate: int = 0  # the output sample rate (0: the model's)
    principal: Principal = ANONYMOUS  # who asked: the model's queue shares out by its key
    #: called with the seconds of audio sent, once per synthesis (the key's audio limit, the audit trail)
    account: Callable[[float], None] | None = None
    #: the body gave reference_text for its stored voice (then no saved voice prompt is used)
    reference_given: bool = False
    #: send the words' timings with the audio (SSE events, the WebSocket's, the captioned routes)
    timestamps: bool = False
    #: a factor on the samples before encoding (Kokoro-FastAPI's ``volume_multiplier``)
    gain: float = 1.0

    @property
    def voice_name(self) -> str:
        """The voice as the audit trail names it: a stored voice, ``ref_audio``, a named voice (or mix),
        or the family's own."""
        if self.voice is not None:
            return self.voice.name
        if self.request.voice is not None:
            return "ref_audio"
        return str(self.request.options.get("voice") or "default")

    @property
    def output_rate(self) -> int:
        return self.rate or self.served.model.sample_rate

    @property
    def incremental(self) -> bool:
        """Whether audio goes out piece by piece (SSE, or a raw/WAV stream) rather than as one file."""
        return self.stream_format == "sse" or (self.stream_format == "audio"
                                               and self.fmt.streams_incrementally)


#: What a field of the body takes, for the error when it is of the wrong type (pydantic's own
#: messages name its internal union members: ``voice.str``).
FIELD_TYPES = {
    "model": "a served model's name (GET /v1/models)", "input": "the text to speak, a string",
    "voice": "a voice name (a string) or {\"id\": name}", "instructions": "a string",
    "response_format": "a string: wav, pcm, flac, mp3, opus or aac", "speed": "a number",
    "stream_format": "\"audio\" or \"sse\"", "stream": "true or false", "language": "a string",
    "seed": "an integer", "reference_text": "a string",
    "sample_rate": "a number of Hz or \"native\"", "ref_audio": "a string (base64 audio or a data URL)",
    "ref_text": "a string", "timestamps": "true or false", "options": "a JSON object of request options",
}


def parse_body(data: Any) -> SpeechBody:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    try:
        return SpeechBody.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        loc = [str(p) for p in first.get("loc", ())]
        field = loc[0] if loc else None
        if field is None:
            raise ApiError(400, str(first.get("msg")), code="invalid_value") from None
        if first.get("type") == "missing":
            raise ApiError(400, f"{field} is missing: it takes {FIELD_TYPES.get(field, 'a value')}",
                           param=field, code="invalid_value") from None
        given = json_value(data.get(field))
        raise ApiError(400, f"{field} must be {FIELD_TYPES.get(field, 'another value')}, not {given}",
                       param=field, code="invalid_value") from None


def json_value(value: Any, limit: int = 60) -> str:
    """A short JSON rendering of a client's value, for an error message."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def pick_model(models: dict[str, ServedModel], name: str | None) -> ServedModel:
    if not name or name in OPENAI_MODELS:
        return next(iter(models.values()))
    served = models.get(name)
    if served is None:
        raise ApiError(404, f"model {name!r} is not served here; served models: {', '.join(models)}",
                       param="model", code="model_not_found")
    return served


def plan_speech(body: SpeechBody, models: dict[str, ServedModel], voices: VoiceStore | VoiceView,
                max_input_chars: int, principal: Principal = ANONYMOUS) -> SpeechPlan:
    """Check everything that can be checked before queueing: model, voice, format, options. ``voices``:
    the voices ``principal`` sees (a stored voice it cannot see is a voice that does not exist)."""
    from audiocpp.engine.spec.options import resolve_options

    served = pick_model(models, body.model)
    spec = served.model.spec
    if not body.input.strip():
        raise ApiError(400, "input is empty: give the text to speak", param="input", code="empty_input")
    if len(body.input) > max_input_chars:
        raise ApiError(400, f"input is {len(body.input)} characters long; this server takes at most "
                       f"{max_input_chars}: send a longer text in several requests", param="input",
                       code="input_too_long")
    stream_format = body.stream_format
    if stream_format is None and body.stream:
        stream_format = "audio"  # Kokoro-FastAPI's "stream": true
    fmt = check_format(response_format(body.response_format, stream_format))
    options: dict[str, Any] = dict(body.options or {})
    for key, value in (body.model_extra or {}).items():
        if key in options and options[key] != value:
            raise ApiError(400, f"option {key!r} is given twice with different values", param=key,
                           code="invalid_value")
        options[key] = value
    voice, named = choose_voice(served, _voice_field(body, options), voices)
    if named is not None:
        options["voice"] = named
    rate = output_rate(body, fmt, served.model.sample_rate, stream_format)
    inline = inline_reference(body, voice)
    language = request_language(served, body.language)
    if body.timestamps:
        check_timestamps(served, "timestamps")
        if stream_format != "sse":
            raise ApiError(400, "timestamps come as events of stream_format sse (speech.audio.timestamps); "
                           "for a whole file with its word timestamps use POST /dev/captioned_speech",
                           param="timestamps", code="invalid_value")
    if body.speed is not None and body.speed != 1.0:
        if spec.option("request", "speed") is None:
            raise ApiError(400, f"{served.family} does not support speed; leave it at 1.0", param="speed",
                           code="unsupported_option")
        options["speed"] = body.speed
    if (body.instructions is not None and body.instructions.strip()
            and spec.option("request", "instruct") is None):
        raise ApiError(400, f"{served.family} does not support instructions (voice design)",
                       param="instructions", code="unsupported_option")
    for key in options:
        row = spec.option("request", key)
        if row is not None and row.type in PATH_TYPES:
            raise ApiError(400, f"option {key!r} takes a file on the server and is not accepted over HTTP; "
                           "upload the audio as a voice (POST /v1/audio/voices) instead", param=key,
                           code="unsupported_option")
    first_class = {"language": language, "seed": body.seed, "reference_text": body.reference_text,
                   "instruct": body.instructions or None}
    checks = [(k, k, v) for k, v in options.items()]
    checks += [(k, "instructions" if k == "instruct" else k, v) for k, v in first_class.items()
               if v is not None]
    for key, param, value in checks:  # one at a time, so the error names the field
        try:
            resolve_options(spec, "request", {key: value}, fill_defaults=False)
        except AudiocppError as error:
            raise from_engine_error(error, param=param) from None

    if body.reference_text is not None and voice is None:
        raise ApiError(400, "reference_text is the transcript of a stored voice's audio and needs a stored "
                       "voice; with ref_audio, give its transcript as ref_text", param="reference_text",
                       code="invalid_value")
    if voice is not None or inline is not None:
        if "clone" not in spec.tasks:
            raise ApiError(400, f"model {served.name!r} ({served.family}) cannot clone voices",
                           param="voice" if voice is not None else "ref_audio", code="unsupported_voice")
        transcript = (body.reference_text if body.reference_text is not None
                      else voice.transcript if voice is not None else body.ref_text) or ""
        check_transcript(served, transcript, voice)
        task = Task.CLONE
    elif body.instructions and "design" in spec.tasks:
        task = Task.DESIGN
    else:
        task = Task.TTS
    streaming = stream_format is not None and "streaming" in spec.modes
    mode = Mode.STREAMING if streaming else Mode.OFFLINE

    request = TaskRequest(text=body.input, instruct=body.instructions or None, language=language,
                          seed=body.seed, reference_text=body.reference_text, options=options)
    plan = SpeechPlan(served, task, mode, request, fmt, stream_format, voice, prompt_options={},
                      rate=rate, principal=principal, timestamps=bool(body.timestamps))
    if voice is not None:
        _attach_voice(plan, voice, body)
    elif inline is not None:
        request.voice = VoiceReference(audio=inline)
        request.reference_text = body.ref_text.strip() if body.ref_text and body.ref_text.strip() else None
    return plan


def _voice_field(body: SpeechBody, options: dict[str, Any]) -> str | dict[str, Any] | None:
    """The request's voice: the body's ``voice``, or the request option ``voice`` given among the options
    (the same value twice is fine; two different ones are a 400)."""
    given = options.pop("voice", None)
    if given is None:
        return body.voice
    if body.voice is not None and body.voice != given:
        raise ApiError(400, "voice is given twice with different values (the field voice and the option "
                       "voice)", param="voice", code="invalid_value")
    if not isinstance(given, str):
        raise ApiError(400, f"voice must be {FIELD_TYPES['voice']}, not {json_value(given)}", param="voice",
                       code="invalid_value")
    return given


def check_timestamps(served: ServedModel, param: str) -> None:
    """Word timings are asked of a model that gives them (its spec's ``word_timestamps``), else a 400."""
    if not served.times_words:
        raise ApiError(400, f"model {served.name!r} ({served.model.spec.display_name}) does not time its "
                       "words; word timestamps come from families with the word_timestamps capability "
                       "(`audiocpp families`)", param=param, code="unsupported_option")


def response_format(name: str | None, stream_format: str | None) -> str:
    """The format asked for: by default ``wav`` (``pcm`` for SSE). SSE deltas are 16-bit PCM, so SSE
    with another format is refused rather than sent as what the client would misdecode."""
    if stream_format != "sse":
        return name or "wav"
    if name not in (None, "pcm"):
        raise ApiError(400, f"stream_format sse sends 16-bit PCM in its deltas, not {name}: ask for "
                       "response_format pcm, or use stream_format audio (or no stream_format) for "
                       f"{name}", param="response_format", code="unsupported_format")
    return "pcm"


def request_language(served: ServedModel, value: str | None) -> str | None:
    """The ``language`` to pass on, by one rule for HTTP, the WebSocket and Wyoming: a model that
    takes a language (OmniVoice) checks it itself (ids and names); a model that infers the language
    accepts one it lists (and infers it); anything else is a 400 naming the model's languages."""
    if value is None or not value.strip():
        return None
    spec = served.model.spec
    if spec.option("request", "language") is not None:
        try:
            served.check_language(value)
        except AudiocppError as error:
            raise from_engine_error(error, param="language") from None
        return value
    if value.strip().lower() in {lang.lower() for lang in spec.languages}:
        return None  # one the model speaks; it has no setting and infers the language from the text
    listed = served.languages()
    shown = ", ".join(listed[:20]) + (f" and {len(listed) - 20} more" if len(listed) > 20 else "")
    raise ApiError(400, f"model {served.name!r} ({spec.display_name}) does not speak language {value!r}; "
                   f"it speaks {shown} (or leave language unset)", param="language", code="invalid_value")


def check_transcript(served: ServedModel, transcript: str, voice: StoredVoice | None) -> None:
    """A family that clones only with the reference's transcript gets one, before the request queues."""
    from audiocpp.engine.request_rules import needs_transcript

    spec = served.model.spec
    if transcript.strip() or not needs_transcript(spec):
        return
    if voice is not None:
        raise ApiError(400, f"voice {voice.name!r} has no transcript, and model {served.name!r} "
                       f"({spec.display_name}) clones only with the transcript of the reference audio: give "
                       "the words spoken in it as reference_text, or store the voice again with its "
                       "transcript", param="voice", code="voice_unusable")
    raise ApiError(400, f"model {served.name!r} ({spec.display_name}) clones only with the transcript of the "
                   "reference audio: give the words spoken in ref_audio as ref_text", param="ref_text",
                   code="invalid_value")


#: OpenAI's ``pcm`` (and the audio of its SSE deltas) is 24 kHz; clients play it at that rate.
OPENAI_PCM_RATE = 24000


def output_rate(body: SpeechBody, fmt: AudioFormat, native: int, stream_format: str | None = None) -> int:
    """The rate the response is written at: ``sample_rate`` (``"native"``: the model's), else
    24 kHz for ``pcm`` and SSE deltas (OpenAI's), else the model's. A rate the format cannot take is a
    400 here, before anything is synthesized."""
    from .encoding import MAX_RATE, MIN_RATE, format_rates

    value = body.sample_rate
    allowed = format_rates(fmt.name)
    if value is None or value == "native":
        rate = OPENAI_PCM_RATE if value is None and (fmt.name == "pcm" or stream_format == "sse") else native
        return rate if not allowed or rate in allowed else max(allowed)  # a codec's nearest: 48 kHz
    if isinstance(value, str):
        raise ApiError(400, f"sample_rate {value!r} is neither a number of Hz nor \"native\"",
                       param="sample_rate", code="invalid_value")
    if not MIN_RATE <= value <= MAX_RATE:
        raise ApiError(400, f"sample_rate {value} is out of range; use {MIN_RATE} to {MAX_RATE} Hz or "
                       "\"native\"", param="sample_rate", code="invalid_value")
    if allowed and value not in allowed:
        raise ApiError(400, f"{fmt.name} takes sample_rate {', '.join(map(str, allowed))} Hz, not {value}",
                       param="sample_rate", code="invalid_value")
    return int(value)


def inline_reference(body: SpeechBody, voice: StoredVoice | None) -> AudioBuffer | None:
    """The inline ``ref_audio`` (with ``ref_text``) decoded and checked as an upload is."""
    if body.ref_audio is None:
        if body.ref_text is not None:
            raise ApiError(400, "ref_text transcribes ref_audio, which is missing", param="ref_text",
                           code="invalid_value")
        return None
    if voice is not None:
        raise ApiError(400, "give either a stored voice or ref_audio, not both", param="ref_audio",
                       code="invalid_value")
    from .voices import decode_reference

    return decode_reference(body.ref_audio, body.ref_text or "")


def _attach_voice(plan: SpeechPlan, voice: StoredVoice, body: SpeechBody) -> None:
    """Clone with the stored voice: its saved prompt for this model and options when there is
    one, else its audio and transcript (and the prompt this run prepares is saved)."""
    request = plan.request
    plan.reference_given = body.reference_text is not None
    transcript = body.reference_text if body.reference_text is not None else voice.transcript
    plan.prompt_options = {**request.options, "language": body.language, "instruct": body.instructions,
                           "reference_text": transcript}
    prompt = voice.prompt_path(plan.served.key, plan.prompt_options)
    if prompt.is_file() and not prompt.is_symlink() and body.reference_text is None:
        request.voice_prompt = prompt
        return
    request.voice = VoiceReference(path=voice.reference)
    request.reference_text = transcript or None


async def synthesize(plan: SpeechPlan, job: Job, events: AsyncIterable[StreamEvent],
                     voices: VoiceStore | VoiceView) -> tuple[TaskResult, bytes]:
    """In the event loop: read the request's ``events`` (its engine job, a row of the model's batch),
    streaming pieces to ``job`` when asked (``("audio", pcm bytes, samples, words)``: the words a piece
    speaks, where the family times them), then encode the whole result. A piece is cheap to encode here;
    the whole file, a family's one offline piece and the saved voice prompt go to a thread."""
    served = plan.served
    result: TaskResult | None = None
    incremental = plan.incremental
    pieces = PieceEncoder(served.model.sample_rate, plan.output_rate, plan.gain)
    async for event in events:
        if event.is_final:
            result = event.result
        elif incremental and event.audio is not None:
            job.emit(("audio", *pieces.push(event.audio), list(event.words)))
    assert result is not None
    if incremental and result.mode is Mode.OFFLINE:  # a family without streaming: one piece
        job.emit(("audio", *await asyncio.to_thread(pieces.push, result.audio), list(result.words)))
    if incremental:
        tail = pieces.finish()
        if tail[1]:
            job.emit(("audio", *tail, []))
    if plan.voice is not None and result.voice_prompt is not None and plan.request.voice_prompt is None:
        await asyncio.to_thread(voices.save_prompt, plan.voice,
                                plan.voice.prompt_path(served.key, plan.prompt_options), result.voice_prompt)
    data = b""
    if not incremental:
        final = result
        data = await asyncio.to_thread(
            lambda: encode(resampled(scaled(final.audio, plan.gain), plan.output_rate), plan.fmt))
    return result, data


def scaled(audio: AudioBuffer, gain: float) -> AudioBuffer:
    """``audio`` times ``gain`` (1.0: itself)."""
    if gain == 1.0:
        return audio
    import numpy as np

    return AudioBuffer(np.asarray(audio.samples, dtype=np.float32) * np.float32(gain), audio.sample_rate)


def sent_seconds(job: Job, plan: SpeechPlan) -> float:
    """Seconds of audio a streamed response sent: its 16-bit mono pieces at the output rate."""
    return job.emitted_bytes / 2 / plan.output_rate


def observe(metrics: Any, plan: SpeechPlan, result: TaskResult, audio_s: float | None = None) -> None:
    """A finished synthesis in the metrics: the audio sent (``audio_s``, for a stream) or the file's."""
    m = result.metrics
    seconds = m.audio_s if audio_s is None else audio_s
    metrics.observe_synthesis(plan.served.name, seconds, m.wall_s / seconds if seconds > 0 else None,
                              m.time_to_first_audio_s)
    if plan.account is not None:
        plan.account(seconds)


def resampled(audio: AudioBuffer, rate: int) -> AudioBuffer:
    """``audio`` at ``rate`` (the engine's resampler, torchaudio's default)."""
    if audio.sample_rate == rate:
        return audio
    from audiocpp.engine.audio.resample import resample

    return AudioBuffer(resample(audio.samples, audio.sample_rate, rate), rate)


class PieceEncoder:
    """Streamed pieces as 16-bit PCM at the output rate (resampled as they come: equal to
    resampling the whole, engine.audio.streaming), times ``gain``."""

    def __init__(self, native: int, rate: int, gain: float = 1.0) -> None:
        self.rate = rate
        self.gain = gain
        self._resampler = None
        if native != rate:
            from audiocpp.engine.audio.streaming import StreamingResampler

            self._resampler = StreamingResampler(native, rate)

    def push(self, audio: AudioBuffer) -> tuple[bytes, int]:
        """(PCM bytes, samples) of a piece."""
        audio = scaled(audio, self.gain)
        if self._resampler is None:
            return pcm16(audio), audio.num_samples
        samples = self._resampler.push(audio.samples)
        return pcm16(AudioBuffer(samples, self.rate)), len(samples)

    def finish(self) -> tuple[bytes, int]:
        if self._resampler is None:
            return b"", 0
        samples = self._resampler.finish()
        return pcm16(AudioBuffer(samples, self.rate)), len(samples)  # scaled as it was pushed


def result_headers(result: TaskResult, served: ServedModel, rate: int | None = None) -> dict[str, str]:
    """audio.cpp's timing headers, plus the rate (of the response), seed and model."""
    m = result.metrics
    headers = {
        "X-Request-Id": request_id(),
        "X-AudioCPP-Model": served.name,
        "X-AudioCPP-Sample-Rate": str(rate or result.audio.sample_rate),
        "X-AudioCPP-Audio-Duration-Ms": f"{m.audio_s * 1000:.1f}",
        "X-AudioCPP-Wall-Ms": f"{m.wall_s * 1000:.1f}",
        "X-AudioCPP-RTF": f"{m.rtf:.4f}" if m.audio_s > 0 else "inf",
    }
    if m.time_to_first_audio_s is not None:
        headers["X-AudioCPP-First-Audio-Ms"] = f"{m.time_to_first_audio_s * 1000:.1f}"
    if m.seed is not None:
        headers["X-AudioCPP-Seed"] = str(m.seed)
    return headers


def request_id() -> str:
    """An id for the response (OpenAI's ``x-request-id``; agent frameworks log it)."""
    import uuid

    return f"req_{uuid.uuid4().hex}"


def timing(result: TaskResult, rate: int | None = None, audio_s: float | None = None) -> dict[str, Any]:
    """The timing of a synthesis; ``audio_s``: the seconds of audio actually sent, for a stream (its
    pieces, without the cross-fades of the offline file the result holds)."""
    m = result.metrics
    seconds = m.audio_s if audio_s is None else audio_s
    return {"wall_ms": round(m.wall_s * 1000, 1), "audio_duration_ms": round(seconds * 1000, 1),
            "rtf": round(m.wall_s / seconds, 4) if seconds > 0 else None,
            "first_audio_ms": (None if m.time_to_first_audio_s is None
                               else round(m.time_to_first_audio_s * 1000, 1)),
            "seed": m.seed, "sample_rate": rate or result.audio.sample_rate}

