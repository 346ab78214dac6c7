"""The VoxCPM2 loaded model and session: request -> prompt -> AR loop -> audio.

Task and option mapping (upstream ``VoxCPM.generate`` arguments in brackets):

- ``tts``: text only. A ``(style description)`` prefix of the text, or the ``instruct``
  option (sent as ``(instruct)text``), designs the voice in any task.
- ``design``: as ``tts`` but a description is required.
- ``clon``:
  - ``--voice-ref R`` alone: isolated reference [``reference_wav_path=R``];
  - ``prompt_audio=P prompt_text=T``: continuation [``prompt_wav_path=P, prompt_text=T``];
  - ``--voice-ref R --reference-text T`` ("ultimate clone"): R is the reference *and* the
    continuation prompt [``reference_wav_path=R, prompt_wav_path=R, prompt_text=T``];
  - ``--voice-ref R`` with ``prompt_audio=P prompt_text=T``: both, from different audio.

Long text: ``text_chunk_size > 0`` splits the text at punctuation (engine chunker); chunks are
generated in order with the same prompt and one random stream, and concatenated.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiocpp.engine.errors import UsageError
from audiocpp.engine.model import LoadedModel
from audiocpp.engine.nn.build import PerDtype, torch_dtype
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from audiocpp.engine.spec.model import ModelSpec
from audiocpp.engine.tasks import Mode, Task

from .generate import DecodeOptions, VoxCPMGenerator
from .prompt import PromptBuilder, design_text, normalize_text
from .weights import VoxCPM2Parts

_DESCRIPTION = re.compile(r"^\s*\(([^()]*)\)")


class VoxCPM2LoadedModel(LoadedModel):
    def __init__(self, spec: ModelSpec, path: Path, load_options: dict[str, Any], parts: VoxCPM2Parts) -> None:
        super().__init__(spec, path, load_options)
        self.parts = parts
        self.config = parts.config
        self.sample_rate = parts.config.sample_rate
        packed = self.load_options.get("packed_linear")
        self.packed_linear = True if packed is None else bool(packed)
        self._generators = PerDtype(self._make_generator)

    def generator_for(self, dtype: torch.dtype) -> VoxCPMGenerator:
        """The AR loop computing in ``dtype``; its weights are loaded in that dtype on first use
        (a bfloat16-only user never holds a float32 copy), on oneDNN-packed linears unless the
        load option ``packed_linear`` is false."""
        return self._generators.get(dtype)

    def _make_generator(self, dtype: torch.dtype) -> VoxCPMGenerator:
        return VoxCPMGenerator(self.parts.build_model(dtype, packed=self.packed_linear), self.parts.codec)

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session:
        return VoxCPM2Session(self, task, mode, options)


class VoxCPM2Session(Session):
    model: VoxCPM2LoadedModel

    def __init__(self, model: VoxCPM2LoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        super().__init__(model, task, mode, options)
        self.dtype = torch_dtype(options.get("compute_dtype"))
        self.generator = model.generator_for(self.dtype)
        cfg = model.config
        self.builder = PromptBuilder(model.parts.tokenizer, cfg.patch_size, cfg.audio_vae.latent_dim,
                                     reference_prefix=cfg.variant.reference_prefix)

    # -- validation -----------------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        o = request.options
        has_prompt_audio, has_prompt_text = o.get("prompt_audio") is not None, o.get("prompt_text") is not None
        if has_prompt_audio != has_prompt_text:
            raise UsageError(
                "prompt_audio and prompt_text go together" if has_prompt_audio
                else "prompt_text needs prompt_audio",
                hint="continuation cloning needs both: --request-option prompt_audio=FILE prompt_text='its transcript'",
            )
        if o.get("reference_text") and request.voice is None:
            raise UsageError("--reference-text needs --voice-ref (the audio it transcribes)")
        if o.get("reference_text") and has_prompt_audio:
            raise UsageError(
                "--reference-text and prompt_audio both give a continuation prompt",
                hint="use --voice-ref R --reference-text T (R is reference and prompt), or --voice-ref R "
                "with prompt_audio/prompt_text (two different recordings)",
            )
        if request.task is not Task.CLONE and (request.voice is not None or has_prompt_audio):
            raise UsageError(f"task {request.task.cli_name!r} takes no reference audio",
                             hint="use --task clon to clone a voice")
        if request.task is Task.DESIGN and not o.get("instruct") and not _DESCRIPTION.match(request.text):
            raise UsageError(
                "voice design needs a description",
                hint="pass --instruct 'a calm, warm female voice' or start the text with '(description)'",
            )

    # -- prompt audio ---------------------------------------------------------------------
    def _encode(self, audio: AudioBuffer, padding: str) -> torch.Tensor:
        key = ("latents", audio.content_hash(), padding)
        return self.cached(key, lambda: self._encode_now(audio, padding))

    def _encode_now(self, audio: AudioBuffer, padding: str) -> torch.Tensor:
        from .prompt import encode_prompt_audio

        vae = self.model.parts.codec
        samples = audio.samples
        if audio.sample_rate != vae.sample_rate:
            from audiocpp.engine.audio.resample import resample

            samples = resample(np.asarray(samples, dtype=np.float32), audio.sample_rate, vae.sample_rate)
        if len(samples) == 0:
            raise UsageError("the prompt / reference audio is empty")
        return encode_prompt_audio(vae, torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32)),
                                   self.model.config.patch_size, padding)

    def _prompt_parts(self, request: PreparedRequest) -> dict[str, Any]:
        o = request.options
        parts: dict[str, Any] = {}
        if request.voice is not None:
            parts["reference"] = self._encode(request.voice, "right")
            if o.get("reference_text"):
                parts["prompt_feats"] = self._encode(request.voice, "left")
                parts["prompt_text"] = str(o["reference_text"])
        if o.get("prompt_audio") is not None:
            parts["prompt_feats"] = self._encode(self.read_audio(o["prompt_audio"]), "left")
            parts["prompt_text"] = str(o["prompt_text"])
        if "reference" in parts and not self.model.config.variant.reference_prefix:
            raise UsageError("this model has no isolated reference prompt",
                             hint="pass --reference-text with --voice-ref (continuation cloning)")
        return parts

    # -- text -----------------------------------------------------------------------------
    def _chunks(self, request: PreparedRequest) -> list[str]:
        text = normalize_text(request.text)
        instruct = request.options.get("instruct")
        size = int(request.options.get("text_chunk_size") or 0)
        if size <= 0:
            return [design_text(text, instruct)]
        description = instruct
        if not description:
            m = _DESCRIPTION.match(text)
            if m:
                description, text = m.group(1), text[m.end():]
        from audiocpp.engine.text.chunking import chunk_text

        pieces = [c for c in chunk_text(text, size) if c.strip()] or [text]
        return [design_text(normalize_text(c), description) for c in pieces]

    def _decode_options(self, request: PreparedRequest) -> DecodeOptions:
        o = request.options
        return DecodeOptions(
            min_len=int(o["min_tokens"]),
            max_len=int(o["max_tokens"]),
            inference_timesteps=int(o["num_inference_steps"]),
            cfg_value=float(o["guidance_scale"]),
            retry_badcase=bool(o["retry_badcase"]) and not request.streaming,
            retry_badcase_max_times=int(o["retry_badcase_max_times"]),
            retry_badcase_ratio_threshold=float(o["retry_badcase_ratio_threshold"]),
        )

    # -- synthesis ------------------------------------------------------------------------
    def _synthesize(self, request: PreparedRequest) -> Generator[AudioBuffer, None, Synthesis]:
        parts = self._prompt_parts(request)
        opts = self._decode_options(request)
        chunks = self._chunks(request)
        rng = request.generator()
        rate = self.sample_rate
        outputs: list[AudioBuffer] = []
        details: dict[str, Any] = {"latents": [], "num_patches": [], "stopped": [], "attempts": [],
                                   "text_tokens": [], "mode": None, "seed": request.seed}
        request.progress.start(self.family, len(chunks))
        for chunk in chunks:
            prompt = self.builder.build(chunk, **parts)
            details["mode"] = prompt.mode
            details["text_tokens"].append(prompt.tokens.tolist())
            if request.streaming:
                pieces: list[np.ndarray] = []
                stream = self.generator.stream(prompt, opts, rng)
                while True:
                    try:
                        piece = next(stream)
                    except StopIteration as stop:
                        run = stop.value
                        break
                    samples = piece.detach().to(torch.float32).numpy().copy()
                    pieces.append(samples)
                    yield AudioBuffer(samples, rate)
                audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
                attempts = 1
            else:
                wav, run, attempts = self.generator.generate(prompt, opts, rng)
                audio = wav.detach().to(torch.float32).numpy().copy()
            outputs.append(AudioBuffer(audio, rate))
            details["latents"].append(run.generated.to(torch.float32).numpy())
            details["num_patches"].append(len(run.patches))
            details["stopped"].append(run.stopped)
            details["attempts"].append(attempts)
            request.progress.advance()
        audio = np.concatenate([b.samples for b in outputs]) if outputs else np.zeros(0, np.float32)
        return Synthesis(AudioBuffer(audio, rate), chunks=outputs if len(outputs) > 1 else [], details=details)
