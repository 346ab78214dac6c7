"""The Audio8 TTS loaded model and session: request -> prompt -> DualAR frames -> codec audio.

Tasks and options:

- ``tts``: text only (prompt without reference).
- ``clon``: ``--voice-ref`` with its transcript ``--reference-text`` (required), or the request
  option ``multi_reference_cond`` (a JSON list of ``{"audio": path, "text": transcript}``, in order).
  Reference audio is mixed to mono, resampled to 44.1 kHz and encoded by the codec (cached by
  content hash).
- ``do_sample=false`` decodes greedily (upstream ``do_sample=False``); otherwise sampling with
  ``temperature``, ``top_p``, ``top_k`` and RAS, seeded by ``seed``.
- Long text (``text_chunk_size`` > 0, longer than it): audio.cpp's word-budget chunks, generated
  in order with one random stream, each chunk after the first prompted with the previous chunk as
  a finished turn (its text and codes), decoded separately and concatenated.
- ``--mode streaming``: frames are decoded as they are generated, every
  ``streaming_chunk_frames`` frames, by the causal codec's incremental decoder; the
  concatenation equals the offline output.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiocpp.engine.batching import relay
from audiocpp.engine.device import torch_dtype
from audiocpp.engine.errors import UsageError
from audiocpp.engine.model import LoadedModel
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from audiocpp.engine.spec.model import ModelSpec
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.voice_prompt import CodecPrompt

from .codec import StreamingDecoder
from .generate import DualARGenerator, SamplingOptions, prefill_tensors
from .model.dual_ar import DualAR
from .prompt_layout import PromptLayoutBuilder, Reference, Turn, word_budget_chunks
from .weights import Audio8Parts


class Audio8LoadedModel(LoadedModel):
    def __init__(self, spec: ModelSpec, path: Path, parts: Audio8Parts, load_options: dict[str, Any]) -> None:
        super().__init__(spec, path, load_options)
        self.parts = parts
        self.config = parts.config
        self.sample_rate = parts.config.sample_rate
        self._models: dict[torch.dtype, DualAR] = {}
        packed = self.load_options.get("packed_linear")
        self.packed_linear = True if packed is None else bool(packed)

    def model_for(self, dtype: torch.dtype) -> DualAR:
        """The DualAR computing in ``dtype``, loaded on first use (oneDNN-packed linears unless the
        load option ``packed_linear`` is false)."""
        model = self._models.get(dtype)
        if model is None:
            model = self.parts.build_model(dtype, packed=self.packed_linear)
            self._models[dtype] = model
        return model

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session:
        return Audio8Session(self, task, mode, options)

    # -- voice prompts and the codec tool (`audiocpp codec`) ------------------------------------
    def encode_codes(self, audio: AudioBuffer) -> torch.Tensor:
        """Codec codes ``[10, ceil(n / 2048)]`` of mono reference audio (any rate; to 44.1 kHz)."""
        codec = self.parts.codec
        samples = np.asarray(audio.samples, dtype=np.float32)
        if samples.size == 0:
            raise UsageError("the reference audio is empty", hint="pass audio with sound in it")
        if audio.sample_rate != codec.sample_rate:
            from audiocpp.engine.audio.resample import resample

            samples = resample(samples, audio.sample_rate, codec.sample_rate)
        audio = torch.from_numpy(np.ascontiguousarray(samples))[None, None].to(self.parts.device)
        return codec.encode(audio)[0].cpu()

    def codec_prompt(self, codes: torch.Tensor, text: str) -> CodecPrompt:
        codec = self.parts.codec
        return CodecPrompt(self.family, {"ref_audio_tokens": codes}, text, sample_rate=codec.sample_rate,
                           frame_rate=codec.sample_rate / codec.frame_length)

    def encode_voice_prompt(self, audio: AudioBuffer, reference_text: str | None,
                            options: dict[str, Any]) -> CodecPrompt:
        """What a clone with ``--voice-ref`` encodes: the reference's codes, with its transcript."""
        return self.codec_prompt(self.encode_codes(audio), (reference_text or "").strip())

    def load_voice_prompt(self, path: Path) -> CodecPrompt:
        prompt = CodecPrompt.load(path, family=self.family)
        codes = prompt.tensor("ref_audio_tokens", path)
        cfg = self.parts.codec.cfg
        books = cfg.num_codebooks
        sizes = torch.tensor([cfg.semantic_codebook_size] + [cfg.residual_codebook_size] * (books - 1))
        if codes.is_floating_point() or codes.is_complex() or codes.dim() != 2 or codes.shape[0] != books \
                or codes.shape[1] == 0 or bool((codes < 0).any()) or bool((codes >= sizes[:, None]).any()):
            raise UsageError(f"{path}: ref_audio_tokens must be ({books}, T) codes of this model's "
                             f"codebooks, got {tuple(codes.shape)}",
                             hint="encode the reference with this model: "
                             "`audiocpp codec encode REF.wav --model ... --out voice.prompt`")
        prompt.tensors["ref_audio_tokens"] = codes.to(torch.long)
        return prompt

    def decode_voice_prompt(self, prompt: CodecPrompt) -> AudioBuffer:
        """The codec's decoding of the prompt's codes, as generated frames are decoded."""
        codes = prompt.tensors["ref_audio_tokens"]
        return AudioBuffer(self.parts.codec.decode(codes[None].to(self.parts.device))[0, 0]
                           .to(torch.float32).cpu().numpy().copy(),
                           self.sample_rate)


class Audio8Session(Session):
    model: Audio8LoadedModel

    def __init__(self, model: Audio8LoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        super().__init__(model, task, mode, options)
        # compute_dtype=auto: float32 (the exact mode) for F32 weights and snapshot folders on the
        # CPU, bfloat16 for 16-bit / quantized packages and on GPUs (engine.device)
        self.dtype = torch_dtype(options.get("compute_dtype"), default=model.parts.compute_dtype)
        self.network = model.model_for(self.dtype)
        self.generator = DualARGenerator(self.network)
        self.builder = PromptLayoutBuilder(model.parts.tokenizer, model.config)
        self.codec = model.parts.codec

    # -- validation -------------------------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        o = request.options
        multi = o.get("multi_reference_cond")
        if multi and request.task is not Task.CLONE:
            raise UsageError(f"task {request.task.cli_name!r} takes no references (multi_reference_cond)",
                             hint="use --task clon to condition on reference voices")
        if multi and (request.voice is not None or request.voice_prompt is not None):
            raise UsageError("give either --voice-ref / --voice-prompt or multi_reference_cond, not both",
                             hint="list every reference in multi_reference_cond")
        if multi:
            self._multi_references(str(multi))  # parse errors before any work

    def _multi_references(self, value: str) -> list[tuple[Path, str]]:
        hint = 'e.g. --request-option \'multi_reference_cond=[{"audio": "a.wav", "text": "its words"}]\''
        try:
            items = json.loads(value)
        except json.JSONDecodeError as exc:
            raise UsageError(f"multi_reference_cond is not valid JSON: {exc}", hint=hint) from None
        if not isinstance(items, list) or not items:
            raise UsageError("multi_reference_cond must be a non-empty JSON list", hint=hint)
        refs = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("audio"), str) \
                    or not isinstance(item.get("text"), str):
                raise UsageError(f"multi_reference_cond[{i}] must be an object with string 'audio' "
                                 "and 'text'", hint=hint)
            path = Path(item["audio"]).expanduser()
            if not path.is_file():
                raise UsageError(f"multi_reference_cond[{i}]: audio file {str(path)!r} does not exist")
            if not item["text"].strip():
                raise UsageError(f"multi_reference_cond[{i}]: the transcript is empty", hint=hint)
            refs.append((path, item["text"]))
        return refs

    # -- references --------------------------------------------------------------------------------
    def encode_reference(self, audio: AudioBuffer) -> torch.Tensor:
        """Codec codes ``[10, ceil(n / 2048)]`` of reference audio (44.1 kHz mono; cached)."""
        return self.cached(("codes", audio.content_hash()), lambda: self._encode_now(audio))

    def _encode_now(self, audio: AudioBuffer) -> torch.Tensor:
        return self.model.encode_codes(audio)

    def _references(self, request: PreparedRequest) -> list[Reference]:
        o = request.options
        if request.voice_prompt is not None:  # what --voice-ref with --reference-text would have encoded
            return [Reference(request.voice_prompt.ref_text,
                              request.voice_prompt.tensors["ref_audio_tokens"])]
        if request.voice is not None:
            return [Reference(str(o["reference_text"]), self.encode_reference(request.voice))]
        if o.get("multi_reference_cond"):
            return [Reference(text, self.encode_reference(self.read_audio(path)))
                    for path, text in self._multi_references(str(o["multi_reference_cond"]))]
        return []

    # -- synthesis ---------------------------------------------------------------------------------
    def _chunks(self, request: PreparedRequest) -> list[str]:
        size = int(request.options.get("text_chunk_size") or 0)
        if size <= 0:
            return [request.text]
        return word_budget_chunks(request.text, size) or [request.text]

    def sampling_options(self, request: PreparedRequest) -> SamplingOptions:
        o = request.options
        return SamplingOptions(max_new_tokens=int(o["max_new_tokens"]), temperature=float(o["temperature"]),
                               top_p=float(o["top_p"]), top_k=int(o["top_k"]), do_sample=bool(o["do_sample"]))

    def _synthesize(self, request: PreparedRequest) -> Generator[Any, Any, Synthesis]:
        references = self._references(request)
        opts = self.sampling_options(request)
        chunks = self._chunks(request)
        rng = request.generator()
        rate = self.sample_rate
        step = int(request.options.get("streaming_chunk_frames") or 4)
        outputs: list[AudioBuffer] = []
        details: dict[str, Any] = {"codes": [], "prompts": [], "finished": [], "seed": request.seed,
                                   "chunks": chunks}
        previous: Turn | None = None
        request.progress.start(self.family, len(chunks))
        for chunk in chunks:
            prompt, _ = prefill_tensors([self.builder.build(chunk, references, previous)], self.model.config)
            details["prompts"].append(prompt[0].numpy())
            frames: list[torch.Tensor] = []
            pieces: list[np.ndarray] = []
            decoder = StreamingDecoder(self.codec) if request.streaming else None
            finished = False

            def take(frame: torch.Tensor | None, frames: list[torch.Tensor] = frames,
                     pieces: list[np.ndarray] = pieces,
                     decoder: StreamingDecoder | None = decoder) -> AudioBuffer | None:
                nonlocal finished
                if frame is None:
                    finished = True
                    return None
                frames.append(frame.cpu())
                if decoder is None or len(frames) % step:
                    return None
                pieces.append(self._push(decoder, frames[-step:]))
                return AudioBuffer(pieces[-1], rate)

            yield from relay(self.generator.row(prompt.to(self.model.parts.device), opts, rng), take)
            pending = len(frames) % step
            if decoder is not None and pending:
                pieces.append(self._push(decoder, frames[-pending:]))
                yield AudioBuffer(pieces[-1], rate)
            codes = (torch.stack(frames, dim=1) if frames
                     else torch.zeros((self.model.config.num_codebooks, 0), dtype=torch.long))
            if decoder is not None:
                audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
            else:
                audio = self._decode(codes)
            outputs.append(AudioBuffer(audio, rate))
            details["codes"].append(codes.numpy())
            details["finished"].append(finished)
            if codes.shape[1]:
                previous = Turn(chunk, codes)
            request.progress.advance()
        audio = np.concatenate([b.samples for b in outputs]) if outputs else np.zeros(0, np.float32)
        voice_prompt = request.voice_prompt
        if voice_prompt is None and request.voice is not None:  # the prepared voice, for --voice-prompt-out
            voice_prompt = self.model.codec_prompt(references[0].codes,
                                                   str(request.options["reference_text"]))
        return Synthesis(AudioBuffer(audio, rate), chunks=outputs if len(outputs) > 1 else [],
                         details=details, voice_prompt=voice_prompt)

    def _decode(self, codes: torch.Tensor) -> np.ndarray:
        if codes.shape[1] == 0:
            return np.zeros(0, np.float32)
        return (self.codec.decode(codes[None].to(self.model.parts.device))[0, 0].to(torch.float32).cpu()
                .numpy().copy())

    def _push(self, decoder: StreamingDecoder, frames: list[torch.Tensor]) -> np.ndarray:
        codes = torch.stack(frames, dim=1)[None].to(self.model.parts.device)
        return decoder.push(codes)[0, 0].to(torch.float32).cpu().numpy().copy()
