"""The OmniVoice loaded model and session: one request -> prompt(s) -> MaskGIT tokens -> codec
-> audio, following upstream's ``OmniVoice.generate`` for one item (``_preprocess_all``,
``_generate_chunked``, ``_decode_and_post_process``).

- auto voice (``tts``), voice design (``design``, or ``tts`` with ``--instruct``), cloning
  (``clon``: ``--voice-ref`` + ``--reference-text``, or ``--voice-prompt``);
- long-form: when the estimated length exceeds ``audio_chunk_threshold`` seconds, the text
  is split at punctuation into ``audio_chunk_duration``-second chunks; without a reference
  chunk 0 becomes the voice of the others; chunks are cross-faded;
- streaming yields each chunk's audio as it is decoded, with its own volume and the junction
  fades and gaps of the merge, and the final event carries those pieces joined (one length for
  the request whatever the output). A text under the long-form threshold is streamed one
  sentence per chunk (generated as long-form chunks are), so the first sentence's audio comes
  before the rest is generated; its audio then differs from offline's single pass.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audiocpp.engine.audio.dsp import cross_fade_chunks, fade_and_pad, peak_normalize
from audiocpp.engine.audio.resample import resample
from audiocpp.engine.audio.silence import remove_silence
from audiocpp.engine.batching import Op
from audiocpp.engine.device import ComputeMode, compute_mode
from audiocpp.engine.errors import UsageError
from audiocpp.engine.loaded_model import LoadedModel
from audiocpp.engine.nn.build import PerDtype
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.tasks import Mode, Task
from audiocpp.engine.text.chunking import chunk_text_punctuation

from .codec import HiggsAudioV2Codec
from .config import OmniVoiceConfig
from .generate import MaskGitDecoder, MaskGitParams
from .model import OmniVoiceLM
from .prompt_layout import (
    ZH_RE,
    PromptLayout,
    add_punctuation,
    build_prompt_layout,
    estimate_target_tokens,
    resolve_instruct,
    resolve_language,
)
from .voice import OmniVoicePrompt
from .weights import OmniVoiceParts


class OmniVoiceLoadedModel(LoadedModel):
    """The LM (in the default compute mode) and codec of :class:`OmniVoiceParts`; LMs in other
    compute modes are loaded on first use (:meth:`lm_for`)."""

    def __init__(self, spec: ModelSpec, path: Path, load_options: dict[str, Any],
                 parts: OmniVoiceParts) -> None:
        super().__init__(spec, path, load_options)
        self.parts = parts
        self.lm: OmniVoiceLM = parts.lm
        self.codec: HiggsAudioV2Codec = parts.codec
        self.tokenizer = parts.tokenizer
        self.sample_rate = parts.sample_rate
        self.source_id = parts.source_id
        self.device = parts.device
        self.compute = parts.compute
        self._lms = PerDtype(self._load_lm, {parts.compute: parts.lm})

    @property
    def cfg(self) -> OmniVoiceConfig:
        return self.lm.cfg

    def lm_for(self, mode: ComputeMode | torch.dtype) -> OmniVoiceLM:
        """The LM computing in ``mode`` (a dtype: its mode), made once."""
        return self._lms.get(compute_mode(mode))

    def _load_lm(self, mode: ComputeMode) -> OmniVoiceLM:
        """The backbone and heads loaded again for ``mode`` (quantized linears stay quantized in a
        mode that keeps weights stored); the embedding tables stay as stored and are shared with the
        first LM (their rows are summed in float32, then cast)."""
        variant = self.parts.load_lm(mode)
        for name in ("llm.embed_tokens", "audio_embeddings"):
            mine, theirs = self.lm.get_submodule(name), variant.get_submodule(name)
            if mine.weight.dtype == theirs.weight.dtype:
                theirs.weight = mine.weight
        return variant

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> OmniVoiceSession:
        return OmniVoiceSession(self, task, mode, options)

    def load_voice_prompt(self, path: Path) -> OmniVoicePrompt:
        return OmniVoicePrompt.load(path, num_codebooks=self.cfg.num_audio_codebook,
                                    codebook_size=self.codec.cfg.codebook_size)

    # -- the codec tool (`audiocpp codec`) ---------------------------------------------------
    def encode_voice_prompt(self, audio: AudioBuffer, reference_text: str | None,
                            options: dict[str, Any]) -> OmniVoicePrompt:
        """What a clone with ``--voice-ref`` prepares (:meth:`OmniVoiceSession.prepare_voice`)."""
        session = self.create_session(Task.CLONE)
        with torch.inference_mode():
            return session.prepare_voice(audio, reference_text or "",
                                         bool(options.get("preprocess_prompt", True)))

    def decode_voice_prompt(self, prompt: OmniVoicePrompt) -> AudioBuffer:
        """The codec's decoding of the prompt's codes, as a clone's tokens are decoded."""
        session = self.create_session(Task.CLONE)
        return AudioBuffer(session.decode(prompt.ref_audio_tokens)[0], self.sample_rate)


class OmniVoiceSession(Session):
    model: OmniVoiceLoadedModel

    def __init__(self, model: OmniVoiceLoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        super().__init__(model, task, mode, options)
        self.compute = compute_mode(options.get("compute_dtype"), model.compute)
        self.decoder = MaskGitDecoder(model.lm_for(self.compute), self.compute.dtype)

    # -- validation ----------------------------------------------------------------------
    def _validate(self, request: PreparedRequest) -> None:
        opts = request.options
        resolve_language(opts.get("language"))
        resolve_instruct(opts.get("instruct"), use_zh=bool(ZH_RE.search(request.text)))
        if self.task is Task.DESIGN and not (opts.get("instruct") or "").strip():
            raise UsageError("task 'design' needs --instruct with the voice attributes",
                             hint="e.g. --instruct 'female, low pitch, british accent'")

    # -- reference voice -----------------------------------------------------------------
    def prepare_voice(self, audio: AudioBuffer, ref_text: str, preprocess: bool) -> OmniVoicePrompt:
        """Upstream ``create_voice_clone_prompt``: to 24 kHz, RMS to at least 0.1, silence trim,
        length to whole frames, encode; the transcript gets final punctuation."""
        model, sr = self.model, self.model.sample_rate
        wav = audio.samples[np.newaxis, :].astype(np.float32)
        if audio.sample_rate != sr:
            wav = resample(torch.from_numpy(wav), audio.sample_rate, sr).numpy()
        rms = float(np.sqrt(np.mean(wav ** 2)))
        if 0 < rms < 0.1:
            wav = wav * 0.1 / rms
        if preprocess:
            wav = remove_silence(wav, sr, mid_sil=200, lead_sil=100, trail_sil=200)
            if wav.shape[-1] == 0:
                raise UsageError("the reference audio is empty after silence removal",
                                 hint="use a reference with speech, "
                                 "or --request-option preprocess_prompt=false")
        hop = model.codec.hop_length
        clip = int(wav.shape[-1] % hop)
        if clip > 0:
            wav = wav[:, :-clip]
        if wav.shape[-1] == 0:
            raise UsageError(f"the reference audio is shorter than one codec frame "
                             f"({hop} samples at {sr} Hz)")
        with torch.inference_mode():
            audio_in = torch.from_numpy(np.ascontiguousarray(wav)).unsqueeze(0).to(model.device)
            codes = model.codec.encode(audio_in)[0].cpu()
        return OmniVoicePrompt(codes, add_punctuation(ref_text) if preprocess else ref_text, rms,
                               sample_rate=sr, frame_rate=float(model.codec.frame_rate))

    def _voice(self, request: PreparedRequest, generator: torch.Generator) -> OmniVoicePrompt | None:
        opts = request.options
        if request.voice_prompt is not None:
            voice = request.voice_prompt
        elif request.voice is not None:
            audio, text, pre = request.voice, opts["reference_text"], bool(opts["preprocess_prompt"])
            voice = self.cached(("voice", audio.content_hash(), pre, text),
                                lambda: self.prepare_voice(audio, text, pre))
        else:
            return None
        # Upstream encodes the reference inside generate(), and its HuBERT draws from the RNG.
        self.model.codec.semantic_model.skip_layerdrop_draws(generator)
        return voice

    # -- synthesis -----------------------------------------------------------------------
    def _synthesize(self, request: PreparedRequest) -> Generator[Any, Any, Synthesis]:
        opts, text, model = request.options, request.text, self.model
        cfg, fps = model.cfg, model.codec.frame_rate
        generator = request.generator()
        params = MaskGitParams(
            num_step=int(opts["num_inference_steps"]), guidance_scale=float(opts["guidance_scale"]),
            t_shift=float(opts["t_shift"]), layer_penalty_factor=float(opts["layer_penalty_factor"]),
            position_temperature=float(opts["position_temperature"]),
            class_temperature=float(opts["class_temperature"]),
        )
        language = resolve_language(opts.get("language"))
        instruct = resolve_instruct(opts.get("instruct"), use_zh=bool(ZH_RE.search(text)))
        voice = self._voice(request, generator)
        ref_codes = voice.ref_audio_tokens if voice is not None else None
        ref_text = voice.ref_text if voice is not None else None
        ref_len = ref_codes.shape[-1] if ref_codes is not None else None
        speed = float(opts["speed"])
        duration = opts.get("duration")
        if duration is not None:
            estimate = estimate_target_tokens(text, ref_text, ref_len, 1.0)
            target = max(1, int(float(duration) * fps))
            speed = estimate / target
        else:
            target = estimate_target_tokens(text, ref_text, ref_len, speed)

        chunk_s = float(opts["audio_chunk_duration"])
        if chunk_s > 0 and target > int(float(opts["audio_chunk_threshold"]) * fps):
            texts = chunk_text_punctuation(text, int(chunk_s * fps / (target / len(text))), min_chunk_len=3)
        elif chunk_s > 0 and request.streaming:  # one sentence per chunk: the first audio comes early
            texts = chunk_text_punctuation(text, 0, min_chunk_len=3)
        else:
            texts = [text]
        request.progress.start("omnivoice", params.num_step * len(texts))

        prompts: list[PromptLayout] = []

        def run(chunk_text: str, num_target: int, r_text: str | None,
                r_codes: torch.Tensor | None) -> Generator[Op, Any, torch.Tensor]:
            prompt = build_prompt_layout(model.tokenizer, chunk_text, num_target,
                                         num_codebooks=cfg.num_audio_codebook,
                                         mask_id=cfg.audio_mask_id, ref_text=r_text, ref_codes=r_codes,
                                         language=language, instruct=instruct, denoise=bool(opts["denoise"]))
            prompts.append(prompt)
            return (yield from self.decoder.generate(prompt, params, generator, request.progress))

        rms = voice.ref_rms if voice is not None else None
        tokens: list[torch.Tensor] = []
        lens: list[int] = []
        decoded: list[np.ndarray] = []
        pieces: list[AudioBuffer] = []
        for i, chunk in enumerate(texts):
            if len(texts) == 1:
                r_text, r_codes, n = ref_text, ref_codes, target
            else:
                if voice is None and i > 0:  # auto voice: chunk 0 is the voice of the rest
                    r_text, r_codes = texts[0], tokens[0]
                else:
                    r_text, r_codes = ref_text, ref_codes
                n = estimate_target_tokens(chunk, r_text, r_codes.shape[-1] if r_codes is not None else None,
                                           speed)
            out = yield from run(chunk, n, r_text, r_codes)
            tokens.append(out)
            lens.append(n)
            decoded.append(self.decode(out))
            if request.streaming:
                samples = self.stream_piece(decoded[-1], i, len(texts), rms, opts)
                piece = AudioBuffer(samples, model.sample_rate)
                pieces.append(piece)
                yield piece
            elif len(texts) > 1:
                pieces.append(AudioBuffer(self.postprocess(decoded[-1], rms, opts)[0], model.sample_rate))
        if request.streaming:  # the pieces as streamed, joined: one length whatever the output
            audio = AudioBuffer(np.concatenate([p.samples for p in pieces]), model.sample_rate)
        else:
            final = self.postprocess(cross_fade_chunks(decoded, model.sample_rate), rms, opts)[0]
            audio = AudioBuffer(final, model.sample_rate)
        details = {"tokens": [t.numpy() for t in tokens], "target_lens": lens, "chunk_texts": texts,
                   "prompts": prompts, "language": language, "instruct": instruct}
        if ref_codes is not None:
            details["ref_codes"] = ref_codes.numpy()
        return Synthesis(audio=audio, chunks=pieces if len(texts) > 1 else [], voice_prompt=voice,
                         details=details)

    # -- audio ---------------------------------------------------------------------------------
    def decode(self, tokens: torch.Tensor) -> np.ndarray:
        """(C, T) tokens -> (1, hop * T) float32 audio."""
        with torch.inference_mode():
            return self.model.codec.decode(tokens.unsqueeze(0).to(self.model.device))[0].cpu().numpy()

    def stream_piece(self, audio: np.ndarray, index: int, count: int, ref_rms: float | None,
                     opts: dict[str, Any]) -> np.ndarray:
        """Chunk ``index`` of ``count`` as streamed, so that the pieces join into the request's audio:
        its own silence removal and volume (the whole is not known yet), the junctions' fades and gap
        of ``cross_fade_chunks`` on its inner sides, and the request's fade and padding on its outer
        ones. One chunk alone is exactly ``postprocess`` of it (offline's audio)."""
        if count == 1:
            return self.postprocess(audio, ref_rms, opts)[0]
        sr = self.model.sample_rate
        out = self.volume(audio, ref_rms, opts)[0].copy()
        junction = int(0.3 * sr) // 3  # cross_fade_chunks' fade and gap at its default 0.3 s
        if index > 0 and (k := min(junction, out.shape[-1])):
            out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        if index < count - 1 and (k := min(junction, out.shape[-1])):
            out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
        fade_n, pad_n = int(float(opts["fade_duration"]) * sr), int(float(opts["pad_duration"]) * sr)
        k = min(fade_n, out.shape[-1] // 2)
        if index == 0 and k > 0:
            out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        if index == count - 1 and k > 0:
            out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
        head = pad_n if index == 0 else 0
        tail = pad_n if index == count - 1 else junction
        return np.concatenate([np.zeros(head, np.float32), out, np.zeros(tail, np.float32)])

    def volume(self, audio: np.ndarray, ref_rms: float | None, opts: dict[str, Any]) -> np.ndarray:
        """Upstream ``_post_process_audio`` before its fades: optional silence removal, then the volume
        (reference RMS below 0.1 rescales, no reference peak-normalises to 0.5)."""
        sr = self.model.sample_rate
        if opts["postprocess_output"]:
            audio = remove_silence(audio, sr, mid_sil=500, lead_sil=100, trail_sil=100)
        if ref_rms is not None and ref_rms < 0.1:
            audio = audio * ref_rms / 0.1
        elif ref_rms is None:
            audio = peak_normalize(audio, 0.5)
        return audio

    def postprocess(self, audio: np.ndarray, ref_rms: float | None, opts: dict[str, Any]) -> np.ndarray:
        """Upstream ``_post_process_audio``: optional silence removal; then always the volume
        (reference RMS below 0.1 rescales, no reference peak-normalises to 0.5), fades, padding."""
        sr = self.model.sample_rate
        return fade_and_pad(self.volume(audio, ref_rms, opts), float(opts["pad_duration"]),
                            float(opts["fade_duration"]), sr)
