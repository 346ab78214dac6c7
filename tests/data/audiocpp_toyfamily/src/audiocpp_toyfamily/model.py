"""The toy model: one sine tone per character, frequencies read from a weights file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from audiocpp.engine.errors import ModelError
from audiocpp.engine.model import LoadedModel
from audiocpp.engine.records import AudioBuffer
from audiocpp.engine.session import Session, Synthesis
from audiocpp.engine.weights import resolve_weights


class ToneModel(LoadedModel):
    sample_rate = 16000

    @classmethod
    def load(cls, spec, path: Path, options):
        resolved = resolve_weights(spec, path)  # a folder or a package GGUF, as the spec's sources say
        config = json.loads(resolved.files["config"].read_text())
        weights = resolved.namespaces["weights"]
        if "tone.frequencies" not in weights.names():
            raise ModelError(f"{path} has no tensor 'tone.frequencies'")
        model = cls(spec, path, options)
        model.frequencies = weights.get("tone.frequencies").float().numpy()
        model.seconds_per_char = float(config.get("seconds_per_char", 0.02)) * float(options.get("slowdown", 1.0))
        return model

    def _create_session(self, task, mode, options):
        return ToneSession(self, task, mode, options)


class ToneSession(Session):
    def _synthesize(self, request):
        model: ToneModel = self.model
        gain = float(request.options["gain"])
        gen = request.generator()
        import torch

        words = request.text.split()
        pieces = []
        n = int(model.seconds_per_char * model.sample_rate)
        t = np.arange(n, dtype=np.float32) / model.sample_rate
        request.progress.start("toytone", len(words))
        for word in words:
            tones = [np.sin(2 * np.pi * model.frequencies[ord(c) % len(model.frequencies)] * t) for c in word]
            noise = torch.rand(n * len(word), generator=gen).numpy() * 1e-3
            piece = AudioBuffer((np.concatenate(tones) * gain + noise).astype(np.float32), model.sample_rate)
            pieces.append(piece)
            request.progress.advance()
            if request.streaming:
                yield piece
        audio = AudioBuffer(np.concatenate([p.samples for p in pieces]), model.sample_rate)
        return Synthesis(audio=audio, chunks=pieces if len(pieces) > 1 else [], details={"words": len(words)})
