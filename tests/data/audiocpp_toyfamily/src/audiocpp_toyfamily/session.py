"""The toy loaded model and session: each word of the text becomes its characters' tones."""

from __future__ import annotations

import numpy as np
import torch

from audiocpp.engine.plugin_api import AudioBuffer, LoadedModel, Session, Synthesis

from .weights import ToneParts


class ToneLoadedModel(LoadedModel):
    sample_rate = 16000

    def __init__(self, spec, path, load_options, parts: ToneParts) -> None:
        super().__init__(spec, path, load_options)  # sets self.spec, self.path, self.load_options
        self.parts = parts
        self.seconds_per_char = parts.config.seconds_per_char * float(self.load_options["slowdown"])

    def _create_session(self, task, mode, options):
        return ToneSession(self, task, mode, options)


class ToneSession(Session):
    model: ToneLoadedModel

    def _synthesize(self, request):
        model = self.model  # the ToneLoadedModel that made this session
        pitch = self.options["pitch"]  # session options: local names, typed, defaults filled in
        gain = request.options["toytone.gain"]  # request options: full names, typed, defaults filled in
        gen = request.generator()  # a CPU torch.Generator seeded with request.seed
        words = request.text.split()
        pieces = []
        n = int(model.seconds_per_char * model.sample_rate)
        request.progress.start("toytone", len(words))
        for word in words:
            tones = model.parts.bank.word(word, n, model.sample_rate, pitch)
            noise = torch.rand(n * len(word), generator=gen).numpy() * 1e-3
            piece = AudioBuffer((tones * gain + noise).astype(np.float32), model.sample_rate)
            pieces.append(piece)
            request.progress.advance()
            if request.streaming:
                yield piece
        audio = AudioBuffer(np.concatenate([p.samples for p in pieces]), model.sample_rate)
        return Synthesis(audio=audio, chunks=pieces, details={"words": len(words)})
