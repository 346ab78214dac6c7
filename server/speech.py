"""``POST /v1/audio/speech``: OpenAI's request body -> an engine request, and its synthesis.

The body is OpenAI's (``model``, ``input``, ``voice``, ``instructions``, ``response_format``,
``speed``, ``stream_format``) plus our extensions: ``language``, ``seed``, ``reference_text``,
``sample_rate`` (the output rate: a number, or ``"native"`` for the model's; by default ``pcm``
and SSE deltas are 24 kHz, as OpenAI's are, and the other formats the model's rate), ``ref_audio``
with ``ref_text`` (an inline reference to clone: base64 bytes or a ``data:audio/...;base64,`` URL,
checked as voice uploads are), and any request option of the model's spec, at the top level or in
``options``. Options are typed and checked by the engine's own parser (``resolve_options``),
before the request is queued, so a bad one is a 400 at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from audiocpp.engine.errors import AudiocppError
from audiocpp.engine.records import AudioBuffer, TaskRequest, TaskResult, VoiceReference
from audiocpp.engine.tasks import Mode, Task

from .encoding import AudioFormat, check_format, encode, pcm16
from .errors import ApiError, from_engine_error
from .models import PATH_TYPES, ServedModel
from .scheduler import Job, ModelWorker
from .voices import BUILTIN_VOICES, StoredVoice, VoiceStore

#: OpenAI's model names: they mean the server's first model, so unmodified clients work.
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-tts")


class SpeechBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: StrictStr | None = None
    input: StrictStr
    voice: StrictStr | dict[str, Any] | None = None
    instructions: StrictStr | None = None
    response_format: StrictStr = "wav"
    speed: float | None = None
    stream_format: Literal["audio", "sse"] | None = None
    language: StrictStr | None = None
    seed: int | None = None
    reference_text: StrictStr | None = None
    sample_rate: int | str | None = None  # Hz, or "native" (checked by output_rate)
    ref_audio: StrictStr | None = None
    ref_text: StrictStr | None = None
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

    @property
    def output_rate(self) -> int:
        return self.rate or self.served.model.sample_rate

    @property
    def incremental(self) -> bool:
        """Whether audio goes out piece by piece (SSE, or a raw/WAV stream) rather than as one file."""
        return self.stream_format == "sse" or (self.stream_format == "audio"
                                               and self.fmt.streams_incrementally)


def parse_body(data: Any) -> SpeechBody:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_request")
    try:
        return SpeechBody.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        raise ApiError(400, f"{param}: {first.get('msg')}" if param else str(first.get("msg")),
                       param=param, code="invalid_value") from None


def pick_model(models: dict[str, ServedModel], name: str | None) -> ServedModel:
    if not name or name in OPENAI_MODELS:
        return next(iter(models.values()))
    served = models.get(name)
    if served is None:
        raise ApiError(404, f"model {name!r} is not served here; served models: {', '.join(models)}",
                       param="model", code="model_not_found")
    return served


def resolve_voice(value: str | dict[str, Any] | None, voices: VoiceStore) -> StoredVoice | None:
    """``None`` for the family's own voice (``default`` or an OpenAI name), else the stored voice."""
    if isinstance(value, dict):
        value = value.get("id")
        if not isinstance(value, str):
            raise ApiError(400, "voice must be a name or {\"id\": name}", param="voice", code="invalid_value")
    if value is None or value.strip().lower() in BUILTIN_VOICES:
        return None
    voice = voices.get(value)
    if voice is None:
        raise ApiError(400, f"voice {value!r} is neither a stored voice nor a built-in one; stored voices "
                       "are listed by GET /v1/audio/voices and added by POST /v1/audio/voices",
                       param="voice", code="voice_not_found")
    return voice


def plan_speech(body: SpeechBody, models: dict[str, ServedModel], voices: VoiceStore,
                max_input_chars: int) -> SpeechPlan:
    """Check everything that can be checked before queueing: model, voice, format, options."""
    from audiocpp.engine.spec.options import resolve_options

    served = pick_model(models, body.model)
    spec = served.model.spec
    if not body.input.strip():
        raise ApiError(400, "input is empty: give the text to speak", param="input", code="empty_input")
    if len(body.input) > max_input_chars:
        raise ApiError(400, f"input is {len(body.input)} characters long; this server takes at most "
                       f"{max_input_chars} (--max-input-chars)", param="input", code="input_too_long")
    fmt = check_format(body.response_format)
    voice = resolve_voice(body.voice, voices)
    rate = output_rate(body, fmt, served.model.sample_rate)
    inline = inline_reference(body, voice)

    options: dict[str, Any] = dict(body.options or {})
    for key, value in (body.model_extra or {}).items():
        if key in options and options[key] != value:
            raise ApiError(400, f"option {key!r} is given twice with different values", param=key,
                           code="invalid_value")
        options[key] = value
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
    first_class = {"language": body.language, "seed": body.seed, "reference_text": body.reference_text,
                   "instruct": body.instructions or None}
    checks = [(k, k, v) for k, v in options.items()]
    checks += [(k, "instructions" if k == "instruct" else k, v) for k, v in first_class.items()
               if v is not None]
    for key, param, value in checks:  # one at a time, so the error names the field
        try:
            resolve_options(spec, "request", {key: value}, fill_defaults=False)
        except AudiocppError as error:
            raise from_engine_error(error, param=param) from None

    if voice is not None or inline is not None:
        if "clone" not in spec.tasks:
            raise ApiError(400, f"model {served.name!r} ({served.family}) cannot clone voices",
                           param="voice" if voice is not None else "ref_audio", code="unsupported_voice")
        task = Task.CLONE
    elif body.instructions and "design" in spec.tasks:
        task = Task.DESIGN
    else:
        task = Task.TTS
    streaming = body.stream_format is not None and "streaming" in spec.modes
    mode = Mode.STREAMING if streaming else Mode.OFFLINE

    request = TaskRequest(text=body.input, instruct=body.instructions or None, language=body.language,
                          seed=body.seed, reference_text=body.reference_text, options=options)
    plan = SpeechPlan(served, task, mode, request, fmt, body.stream_format, voice, prompt_options={},
                      rate=rate)
    if voice is not None:
        _attach_voice(plan, voice, body)
    elif inline is not None:
        request.voice = VoiceReference(audio=inline)
        request.reference_text = body.ref_text.strip() if body.ref_text and body.ref_text.strip() else None
    return plan


#: OpenAI's ``pcm`` (and the audio of its SSE deltas) is 24 kHz; clients play it at that rate.
OPENAI_PCM_RATE = 24000


def output_rate(body: SpeechBody, fmt: AudioFormat, native: int) -> int:
    """The rate the response is written at: ``sample_rate`` (``"native"``: the model's), else
    24 kHz for ``pcm`` and SSE deltas (OpenAI's), else the model's."""
    from .encoding import OPUS_RATES

    value = body.sample_rate
    if value == "native":
        return native
    if value is None:
        return OPENAI_PCM_RATE if fmt.name == "pcm" or body.stream_format == "sse" else native
    if isinstance(value, str):
        raise ApiError(400, f"sample_rate {value!r} is neither a number of Hz nor \"native\"",
                       param="sample_rate", code="invalid_value")
    if not 8000 <= value <= 192000:
        raise ApiError(400, f"sample_rate {value} is out of range; use 8000 to 192000 Hz or \"native\"",
                       param="sample_rate", code="invalid_value")
    if fmt.name == "opus" and value not in OPUS_RATES:
        raise ApiError(400, f"opus takes sample_rate {', '.join(map(str, OPUS_RATES))}", param="sample_rate",
                       code="invalid_value")
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
    transcript = body.reference_text if body.reference_text is not None else voice.transcript
    plan.prompt_options = {**request.options, "language": body.language, "instruct": body.instructions,
                           "reference_text": transcript}
    prompt = voice.prompt_path(plan.served.key, plan.prompt_options)
    if prompt.is_file() and body.reference_text is None:
        request.voice_prompt = prompt
        return
    request.voice = VoiceReference(path=voice.reference)
    request.reference_text = transcript or None


def synthesize(plan: SpeechPlan, job: Job, worker: ModelWorker,
               voices: VoiceStore) -> tuple[TaskResult, bytes]:
    """Run on a worker thread: synthesize as a row of the model's batch, streaming pieces to
    ``job`` when asked, then encode the whole result (outside the batch)."""
    served = plan.served
    result: TaskResult | None = None
    incremental = plan.incremental
    pieces = PieceEncoder(served.model.sample_rate, plan.output_rate)
    stream = worker.events(job, plan.request, plan.task, plan.mode, served.session_options)
    try:
        for event in stream:
            job.check()
            if event.is_final:
                result = event.result
            elif incremental and event.audio is not None:
                job.emit(("audio", *pieces.push(event.audio)))
    finally:
        stream.close()
    assert result is not None
    if incremental and result.mode is Mode.OFFLINE:  # a family without streaming: one piece
        job.emit(("audio", *pieces.push(result.audio)))
    if incremental:
        tail = pieces.finish()
        if tail[1]:
            job.emit(("audio", *tail))
    if plan.voice is not None and result.voice_prompt is not None and plan.request.voice_prompt is None:
        voices.save_prompt(plan.voice, plan.voice.prompt_path(served.key, plan.prompt_options),
                           result.voice_prompt)
    data = b"" if incremental else encode(resampled(result.audio, plan.output_rate), plan.fmt)
    return result, data


def resampled(audio: AudioBuffer, rate: int) -> AudioBuffer:
    """``audio`` at ``rate`` (the engine's resampler, torchaudio's default)."""
    if audio.sample_rate == rate:
        return audio
    from audiocpp.engine.audio.resample import resample

    return AudioBuffer(resample(audio.samples, audio.sample_rate, rate), rate)


class PieceEncoder:
    """Streamed pieces as 16-bit PCM at the output rate (resampled as they come: equal to
    resampling the whole, engine.audio.streaming)."""

    def __init__(self, native: int, rate: int) -> None:
        self.rate = rate
        self._resampler = None
        if native != rate:
            from audiocpp.engine.audio.streaming import StreamingResampler

            self._resampler = StreamingResampler(native, rate)

    def push(self, audio: AudioBuffer) -> tuple[bytes, int]:
        """(PCM bytes, samples) of a piece."""
        if self._resampler is None:
            return pcm16(audio), audio.num_samples
        samples = self._resampler.push(audio.samples)
        return pcm16(AudioBuffer(samples, self.rate)), len(samples)

    def finish(self) -> tuple[bytes, int]:
        if self._resampler is None:
            return b"", 0
        samples = self._resampler.finish()
        return pcm16(AudioBuffer(samples, self.rate)), len(samples)


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


def timing(result: TaskResult, rate: int | None = None) -> dict[str, Any]:
    m = result.metrics
    return {"wall_ms": round(m.wall_s * 1000, 1), "audio_duration_ms": round(m.audio_s * 1000, 1),
            "rtf": round(m.rtf, 4) if m.audio_s > 0 else None,
            "first_audio_ms": (None if m.time_to_first_audio_s is None
                               else round(m.time_to_first_audio_s * 1000, 1)),
            "seed": m.seed, "sample_rate": rate or result.audio.sample_rate}

