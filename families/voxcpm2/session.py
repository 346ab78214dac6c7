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

from audiocpp.engine.batching import relay
from audiocpp.engine.device import ComputeMode, compute_mode
from audiocpp.engine.errors import UsageError
from audiocpp.engine.loaded_model import LoadedModel
from audiocpp.engine.nn.build import PerDtype
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.request_rules import REFERENCE_CAP_OPTION, check_reference_length
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.voice_prompt import CodecPrompt

from .generate import DecodeOptions, VoxCPMGenerator
from .prompt_layout import PromptLayoutBuilder, design_text, normalize_text
from .weights import VoxCPM2Parts

_DESCRIPTION = re.compile(r"^\s*\(([^()]*)\)")


class VoxCPM2LoadedModel(LoadedModel):
    def __init__(self, spec: ModelSpec, path: Path, load_options: dict[str, Any],
                 parts: VoxCPM2Parts) -> None:
        super().__init__(spec, path, load_options)
        self.parts = parts
        self.config = parts.config
        self.sample_rate = parts.config.sample_rate
        packed = self.load_options.get("packed_linear")
        self.packed_linear = True if packed is None else bool(packed)
        self._generators = PerDtype(self._make_generator)

    def generator_for(self, mode: ComputeMode | torch.dtype) -> VoxCPMGenerator:
        """The AR loop computing in ``mode`` (a dtype: its mode); its weights are loaded for that
        mode on first use (a bfloat16-only user never holds a float32 copy), on oneDNN-packed
        linears unless the load option ``packed_linear`` is false."""
        return self._generators.get(compute_mode(mode))

    def _make_generator(self, mode: ComputeMode) -> VoxCPMGenerator:
        return VoxCPMGenerator(self.parts.build_model(mode, packed=self.packed_linear), self.parts.codec)

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session:
        return VoxCPM2Session(self, task, mode, options)

    # -- voice prompts and the codec tool (`audiocpp codec`) ------------------------------------
    def encode_latents(self, audio: AudioBuffer, padding: str) -> torch.Tensor:
        """``(T, P, D)`` latent patches of mono ``audio`` (any rate), padded ``left`` (continuation
        prompt) or ``right`` (reference) to whole patches."""
        from .prompt_layout import encode_prompt_audio

        vae = self.parts.codec
        samples = audio.samples
        if audio.sample_rate != vae.sample_rate:
            from audiocpp.engine.audio.resample import resample

            samples = resample(np.asarray(samples, dtype=np.float32), audio.sample_rate, vae.sample_rate)
        if len(samples) == 0:
            raise UsageError("the prompt / reference audio is empty", hint="pass audio with sound in it")
        return encode_prompt_audio(vae, torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32)),
                                   self.config.patch_size, padding)

    def codec_prompt(self, reference: torch.Tensor | None, prompt: torch.Tensor | None,
                     text: str) -> CodecPrompt:
        """The voice prompt file's content: reference latents (isolated reference) and/or
        continuation latents with their transcript."""
        vae = self.parts.codec
        tensors = {name: t for name, t in (("reference_latents", reference), ("prompt_latents", prompt))
                   if t is not None}
        return CodecPrompt(self.family, tensors, text, sample_rate=vae.sample_rate,
                           frame_rate=vae.sample_rate / (vae.chunk_size * self.config.patch_size))

    def encode_voice_prompt(self, audio: AudioBuffer, reference_text: str | None,
                            options: dict[str, Any]) -> CodecPrompt:
        """What a clone with ``--voice-ref`` (and ``--reference-text``) encodes: the reference
        (right-padded) where the model has an isolated reference prompt, and the continuation
        prompt (left-padded) with the transcript, or always where it has no isolated reference."""
        text = (reference_text or "").strip()
        reference_prefix = self.config.variant.reference_prefix
        return self.codec_prompt(self.encode_latents(audio, "right") if reference_prefix else None,
                                 self.encode_latents(audio, "left") if text or not reference_prefix else None,
                                 text)

    def load_voice_prompt(self, path: Path) -> CodecPrompt:
        prompt = CodecPrompt.load(path, family=self.family)
        shape = (self.config.patch_size, self.config.audio_vae.latent_dim)
        names = [n for n in ("reference_latents", "prompt_latents") if n in prompt.tensors]
        for name in names:
            t = prompt.tensors[name]
            if not t.is_floating_point() or t.dim() != 3 or tuple(t.shape[1:]) != shape or t.shape[0] == 0:
                raise UsageError(f"{path}: {name} must be (T, {shape[0]}, {shape[1]}) latents "
                                 f"for this model, got {tuple(t.shape)}",
                                 hint="encode the reference with this model: "
                                 "`audiocpp codec encode REF.wav --model ... --out voice.prompt`")
            prompt.tensors[name] = t.to(torch.float32)
        if not names:
            raise UsageError(f"{path} holds no VoxCPM latents", hint="encode the reference with "
                             "`audiocpp codec encode REF.wav --model ... --out voice.prompt`")
        return prompt

    def decode_voice_prompt(self, prompt: CodecPrompt) -> AudioBuffer:
        """The AudioVAE's decoding of the reference latents (else the continuation latents)."""
        from .generate import _latents

        patches = prompt.tensors.get("reference_latents", prompt.tensors.get("prompt_latents"))
        audio = self.parts.codec.decode(_latents(patches.to(self.parts.device)))[0, 0]
        return AudioBuffer(audio.to(torch.float32).cpu().numpy().copy(), self.sample_rate)


class VoxCPM2Session(Session):
    model: VoxCPM2LoadedModel

    def __init__(self, model: VoxCPM2LoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        super().__init__(model, task, mode, options)
        self.compute = compute_mode(options.get("compute_dtype"), model.parts.compute)
        self.dtype = self.compute.dtype
        self.generator = model.generator_for(self.compute)
        cfg = model.config
        self.builder = PromptLayoutBuilder(model.parts.tokenizer, cfg.patch_size, cfg.audio_vae.latent_dim,
                                     reference_prefix=cfg.variant.reference_prefix)

    # -- validation -----------------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        o = request.options
        has_prompt_audio, has_prompt_text = (o.get("prompt_audio") is not None,
                                             o.get("prompt_text") is not None)
        if has_prompt_audio != has_prompt_text:
            raise UsageError(
                "prompt_audio and prompt_text go together" if has_prompt_audio
                else "prompt_text needs prompt_audio",
                hint="continuation cloning needs both: "
                "--request-option prompt_audio=FILE prompt_text='its transcript'",
            )
        if o.get("reference_text") and has_prompt_audio:
            raise UsageError(
                "--reference-text and prompt_audio both give a continuation prompt",
                hint="use --voice-ref R --reference-text T (R is reference and prompt), or --voice-ref R "
                "with prompt_audio/prompt_text (two different recordings)",
            )
        if request.task is not Task.CLONE and has_prompt_audio:
            raise UsageError(f"task {request.task.cli_name!r} takes no reference audio (prompt_audio)",
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
        return self.model.encode_latents(audio, padding)

    def _voice_prompt(self, request: PreparedRequest, parts: dict[str, Any]) -> CodecPrompt | None:
        """The prepared voice a clone returns (``--voice-prompt-out``): the given prompt, or the
        latents encoded from ``--voice-ref`` (with its transcript's continuation prompt)."""
        if request.voice_prompt is not None or request.voice is None:
            return request.voice_prompt
        text = str(request.options.get("reference_text") or "")
        return self.model.codec_prompt(parts.get("reference"), parts.get("prompt_feats") if text else None,
                                       text)

    def _prompt_parts(self, request: PreparedRequest) -> dict[str, Any]:
        o = request.options
        parts: dict[str, Any] = {}
        voice_prompt = request.voice_prompt
        if voice_prompt is not None:  # what --voice-ref (and --reference-text) would have encoded
            if "reference_latents" in voice_prompt.tensors:
                parts["reference"] = voice_prompt.tensors["reference_latents"]
            if voice_prompt.ref_text and "prompt_latents" in voice_prompt.tensors:
                if o.get("prompt_audio") is not None:
                    raise UsageError("the voice prompt and prompt_audio both give a continuation prompt",
                                     hint="use a voice prompt encoded without --reference-text, "
                                     "or drop prompt_audio")
                parts["prompt_feats"] = voice_prompt.tensors["prompt_latents"]
                parts["prompt_text"] = voice_prompt.ref_text
        if request.voice is not None:
            parts["reference"] = self._encode(request.voice, "right")
            if o.get("reference_text"):
                parts["prompt_feats"] = self._encode(request.voice, "left")
                parts["prompt_text"] = str(o["reference_text"])
        if o.get("prompt_audio") is not None:
            prompt_audio = self.read_audio(o["prompt_audio"])
            # it comes with its transcript: over the cap it is refused, never cut
            check_reference_length(prompt_audio.duration, o.get(REFERENCE_CAP_OPTION), transcript=True,
                                   name=f"prompt_audio {str(o['prompt_audio'])!r}")
            parts["prompt_feats"] = self._encode(prompt_audio, "left")
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
    def _synthesize(self, request: PreparedRequest) -> Generator[Any, Any, Synthesis]:
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

                def piece_of(audio: torch.Tensor, pieces: list[np.ndarray] = pieces) -> AudioBuffer:
                    samples = audio.detach().to(torch.float32).cpu().numpy().copy()
                    pieces.append(samples)
                    return AudioBuffer(samples, rate)

                run = yield from relay(self.generator.stream(prompt, opts, rng), piece_of)
                audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
                attempts = 1
            else:
                wav, run, attempts = yield from self.generator.generate(prompt, opts, rng)
                audio = wav.detach().to(torch.float32).cpu().numpy().copy()
            outputs.append(AudioBuffer(audio, rate))
            details["latents"].append(run.generated.to(torch.float32).cpu().numpy())
            details["num_patches"].append(len(run.patches))
            details["stopped"].append(run.stopped)
            details["attempts"].append(attempts)
            request.progress.advance()
        audio = np.concatenate([b.samples for b in outputs]) if outputs else np.zeros(0, np.float32)
        return Synthesis(AudioBuffer(audio, rate), chunks=outputs if len(outputs) > 1 else [],
                         details=details, voice_prompt=self._voice_prompt(request, parts))
