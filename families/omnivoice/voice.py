"""Prepared voices: reference codes + transcript + RMS, saved in upstream's
``VoiceClonePrompt`` file format (a plain dict written by ``torch.save``, read with
``torch.load(weights_only=True)``), so prompts made by either side load in the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from audiocpp.engine.errors import UsageError
from audiocpp.engine.voice_prompt import save_prompt_dict

FORMAT_VERSION = 1


@dataclass
class OmniVoicePrompt:
    ref_audio_tokens: torch.Tensor  # (C, T) int64
    ref_text: str
    ref_rms: float
    family: str = "omnivoice"
    sample_rate: int | None = None  # the codec's rate and frames per second (the engine's prompt keys)
    frame_rate: float | None = None

    def save(self, path: str | Path) -> None:
        """Write the prompt atomically: upstream's keys plus the engine's (``engine.voice_prompt``)."""
        path = Path(path)
        data = {"format_version": FORMAT_VERSION, "ref_audio_tokens": self.ref_audio_tokens.detach().cpu(),
                "ref_text": self.ref_text, "ref_rms": float(self.ref_rms), "family": self.family}
        if self.sample_rate is not None and self.frame_rate is not None:
            data.update(sample_rate=int(self.sample_rate), frame_rate=float(self.frame_rate))
        save_prompt_dict(path, data)

    @classmethod
    def load(cls, path: str | Path, *, num_codebooks: int = 8, codebook_size: int = 1024) -> OmniVoicePrompt:
        path = Path(path)

        def bad(why: str) -> UsageError:
            return UsageError(f"{path} is not an OmniVoice voice prompt: {why}",
                              hint="make one with --voice-ref FILE --reference-text TEXT "
                              "--voice-prompt-out FILE")

        from audiocpp.engine.voice_prompt import read_prompt_dict

        try:  # bounded reads, the format version and a string family checked (as every family's prompt)
            data = read_prompt_dict(path, family="omnivoice")
        except UsageError as exc:
            raise bad(exc.message.split(": ", 1)[-1]) from None
        codes, text, rms = data.get("ref_audio_tokens"), data.get("ref_text"), data.get("ref_rms")
        if not isinstance(codes, torch.Tensor) or codes.dim() != 2 or codes.shape[0] != num_codebooks:
            raise bad(f"ref_audio_tokens must be a ({num_codebooks}, T) tensor")
        if codes.is_floating_point() or codes.is_complex() or codes.numel() == 0 or codes.min() < 0 \
                or codes.max() >= codebook_size:
            raise bad(f"ref_audio_tokens must hold codes in [0, {codebook_size})")
        if not isinstance(text, str) or not isinstance(rms, (int, float)):
            raise bad("ref_text must be a string and ref_rms a number")
        from audiocpp.engine.voice_prompt import prompt_number

        rate, fps = (prompt_number(data, "sample_rate", int, path),
                     prompt_number(data, "frame_rate", float, path))
        return cls(codes.to(torch.long), text, float(rms), sample_rate=rate or None, frame_rate=fps or None)
