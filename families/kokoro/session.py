"""The Kokoro loaded model and session: text -> phoneme tokens -> chunks of <= 510 phonemes -> one forward
each -> audio and word timings, following upstream's ``KPipeline.__call__`` (text split at newlines, each
line phonemized and chunked, each chunk's audio appended as it comes) with ``KModel`` as the network.

Streaming yields each chunk's audio with its words as soon as it is decoded; in streaming mode chunks end
at every sentence as well, so the first sentence is heard while the rest is generated (offline cuts only
where a chunk would pass 510 phonemes, as upstream).
"""

from __future__ import annotations

import warnings
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audiocpp.engine.device import ComputeMode, compute_mode
from audiocpp.engine.errors import AudiocppWarning, UsageError
from audiocpp.engine.loaded_model import LoadedModel
from audiocpp.engine.nn.build import PerDtype
from audiocpp.engine.records import AudioBuffer, AudioPiece, WordTiming
from audiocpp.engine.session import PreparedRequest, Session, Synthesis
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.tasks import Mode, Task

from .config import KokoroConfig
from .generate import ForwardOp
from .model import KModel
from .prompt_layout import Chunk, TokenLike, make_chunk, phoneme_tokens, tokens_to_phonemes, word_timings
from .voices import VoiceBank, voice_language
from .weights import KokoroParts, check_compute

SENTENCE_ENDS = frozenset(".!?…")


class KokoroLoadedModel(LoadedModel):
    def __init__(self, spec: ModelSpec, path: Path, load_options: dict[str, Any], parts: KokoroParts) -> None:
        super().__init__(spec, path, load_options)
        self.parts = parts
        self.net = parts.model
        self.voices: VoiceBank = parts.voices
        self.sample_rate = parts.config.sample_rate
        self.device = parts.device
        self.source_id = parts.source_id
        self.compute = parts.compute
        self._nets = PerDtype(self._load_net, {parts.compute: parts.model})

    @property
    def cfg(self) -> KokoroConfig:
        return self.parts.config

    def net_for(self, mode: ComputeMode) -> KModel:
        """The network computing in ``mode``, loaded once."""
        return self._nets.get(mode)

    def _load_net(self, mode: ComputeMode) -> KModel:
        return self.parts.load_net(mode)

    def named_voices(self) -> list[dict[str, Any]]:
        return self.voices.describe()

    def default_voice(self, language: str | None = None) -> str:
        """The voice used when a request names none: af_heart for English where the model has it, else
        the first voice of the text's language, else the model's first voice."""
        names = self.voices.names
        if not names:
            raise UsageError(f"the Kokoro model {self.path} has no voices",
                             hint="put hexgrad's voices/*.pt (or kokoro-onnx's voices-v1.0.bin) next to it")
        if (language is None or language.startswith("en")) and "af_heart" in self.voices:
            return "af_heart"
        if language:
            for name in names:
                lang = voice_language(name)
                if lang and lang.split("-")[0] == language.split("-")[0]:
                    return name
        return names[0]

    def phonemize(self, text: str, language: str | None = None) -> dict[str, Any]:
        from .g2p import phonemize

        if not text.strip():
            raise UsageError("the text to phonemize is empty", hint="give some words")
        result = phonemize(text, language)
        phonemes = tokens_to_phonemes(result.tokens)
        return {"phonemes": phonemes, "tokens": [self.cfg.vocab[p] for p in phonemes if p in self.cfg.vocab],
                "language": result.language, "guessed": result.guessed, "reason": result.reason}

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> KokoroSession:
        return KokoroSession(self, task, mode, options)


def split_sentences(tokens: Sequence[TokenLike]) -> list[list[TokenLike]]:
    """Tokens cut after every sentence-ending punctuation token (streaming's per-sentence chunks)."""
    out: list[list[TokenLike]] = [[]]
    for t in tokens:
        out[-1].append(t)
        if t.phonemes and t.phonemes[-1] in SENTENCE_ENDS:
            out.append([])
    return [group for group in out if group]


class KokoroSession(Session):
    model: KokoroLoadedModel

    def __init__(self, model: KokoroLoadedModel, task: Task, mode: Mode, options: dict[str, Any]) -> None:
        super().__init__(model, task, mode, options)
        self.compute = check_compute(compute_mode(options.get("compute_dtype"), model.compute))
        self.net = model.net_for(self.compute)

    def _validate(self, request: PreparedRequest) -> None:
        opts = request.options
        if opts.get("voice") is not None:
            self.model.voices.resolve(str(opts["voice"]))
        if not opts.get("phonemes") and opts.get("language") is not None:
            from .g2p import check_language

            check_language(str(opts["language"]))

    # -- text -> chunks ---------------------------------------------------------------------------
    def plan(self, request: PreparedRequest) -> tuple[list[Chunk], dict[str, Any]]:
        """The request's chunks and what the text front end decided (language, guess)."""
        opts, cfg = request.options, self.model.cfg
        limit = cfg.max_phonemes
        lines = [line for line in request.text.splitlines() if line.strip()] or [request.text]
        info: dict[str, Any] = {}
        groups: list[list[TokenLike]] = []
        if opts.get("phonemes"):
            info["language"] = None
            for line in lines:
                tokens = phoneme_tokens(line)
                if len(line.strip()) > limit:
                    raise UsageError(f"a line of --phonemes has {len(line.strip())} symbols; Kokoro takes "
                                     "at most "
                                     f"{limit} per forward", hint="split the phonemes over several lines")
                groups.append(list(tokens))
        else:
            from .g2p import chunk_tokens, phonemize

            language = opts.get("language")
            for line in lines:
                guess = None if language is not None else self.han_as_japanese(line, opts.get("voice"))
                result = phonemize(line, language or guess)
                if guess is not None:
                    result.guessed, result.reason = True, (
                        "guessed ja: Han characters without kana, read as Japanese for this model's Japanese "
                        "voice; pass --language to choose")
                info.setdefault("language", result.language)
                if result.guessed:
                    info.setdefault("language_guess", result.reason)
                groups.extend(chunk_tokens(result.tokens, limit))
        if request.streaming:
            groups = [g for group in groups for g in split_sentences(group)]
        chunks = [make_chunk(g, cfg.vocab) for g in groups]
        dropped = "".join(dict.fromkeys("".join(c.dropped for c in chunks)))
        if dropped:
            warnings.warn(f"{len(dropped)} symbol(s) are not in the Kokoro vocabulary and were dropped: "
                          f"{' '.join(repr(s) for s in dropped)}", AudiocppWarning, stacklevel=2)
            info["dropped_symbols"] = dropped
        chunks = [c for c in chunks if c.ids and c.speakable]
        if not chunks:
            raise UsageError("the text has nothing Kokoro can speak (no symbol of its phoneme vocabulary)",
                             hint="give words in a supported language, or phonemes with --phonemes")
        return chunks, info

    def han_as_japanese(self, text: str, voice: str | None) -> str | None:
        """``"ja"`` for text that looks Chinese by its script alone (Han characters, no kana) when the voice
        asked for, or every voice of the model when none is asked for, is Japanese: such text is most
        likely a Japanese title or a short phrase in kanji. Else None (the front end guesses)."""
        from .g2p import detect_language
        from .voices import parse_mix

        code, _ = detect_language(text)
        if not code.startswith("zh"):
            return None
        names = ([t.name for t in parse_mix(voice)] if voice else self.model.voices.names)
        if names and all(voice_language(n) == "ja" for n in names):
            return "ja"
        return None

    # -- synthesis --------------------------------------------------------------------------------
    def _synthesize(self, request: PreparedRequest) -> Generator[Any, Any, Synthesis]:
        opts, model = request.options, self.model
        chunks, info = self.plan(request)
        voice = opts.get("voice") or model.default_voice(info.get("language"))
        voice_name, pack = model.voices.resolve(str(voice))
        speed = float(opts["speed"])
        generator = request.generator() if opts.get("kokoro.source_noise", True) else None
        request.progress.start("kokoro", len(chunks))
        half_frame_s = model.cfg.samples_per_duration_frame / (2.0 * model.sample_rate)
        pieces: list[np.ndarray] = []
        words: list[WordTiming] = []
        durations: list[list[int]] = []
        offset = 0
        for chunk in chunks:
            ref_s = pack[min(chunk.style_index, pack.shape[0] - 1)]
            audio, pred_dur = yield ForwardOp(self.net, chunk.ids, ref_s, speed, generator)
            samples = audio.numpy().reshape(-1)
            chunk.start_s = offset / model.sample_rate
            chunk.words = word_timings(chunk.tokens, pred_dur.tolist(), model.cfg.vocab, half_frame_s,
                                       chunk.start_s)
            words.extend(chunk.words)
            durations.append(pred_dur.tolist())
            pieces.append(samples)
            offset += samples.shape[0]
            request.progress.advance()
            if request.streaming:
                yield AudioPiece(AudioBuffer(samples, model.sample_rate), chunk.words)
        audio = AudioBuffer(np.concatenate(pieces) if pieces else np.zeros(0, np.float32), model.sample_rate)
        chunk_audio = [AudioBuffer(p, model.sample_rate) for p in pieces] if len(pieces) > 1 else []
        details = {"voice": voice_name, "phonemes": [c.phonemes for c in chunks],
                   "ids": [c.ids for c in chunks],
                   "pred_dur": durations, **info}
        return Synthesis(audio=audio, chunks=chunk_audio, details=details, words=words)


