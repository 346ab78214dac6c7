"""Kokoro parity cases, shared by the tests and tools/kokoro/parity_report.py.

Each case is a request of ours (phonemes in, as ``--phonemes`` gives them) and the upstream calls that
give the same audio: ``KModel.forward(phonemes, pack[len(phonemes) - 1], speed)`` per chunk under one
``torch.manual_seed``, as ``KPipeline`` runs a text's chunks one after another.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    checkpoint: str
    chunks: tuple[str, ...]  # the phoneme strings upstream runs, in order
    voice: str = "af_test"
    speed: float = 1.0
    seed: int = 7
    noise: bool = True
    streaming: bool = False
    text: str | None = None  # our request's text when it differs from the chunks joined by newlines
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def request_text(self) -> str:
        return self.text if self.text is not None else "\n".join(self.chunks)

    def upstream(self) -> dict:
        return {"name": self.name, "checkpoint": self.checkpoint, "voice": self.voice, "speed": self.speed,
                "seed": self.seed, "noise": self.noise, "chunks": list(self.chunks)}


HELLO = "həlˈoʊ wˈɜɹld."
LONGER = "ðə kwˈɪk bɹˈaʊn fˈɑːks ʤˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ!"
JAPANESE = "koɲɲiʨiβa. kʲoː no seʦɨmeː o haʥimemasɨ."

CASES = [
    Case("hello", "tiny", (HELLO,)),
    Case("speed", "tiny", (LONGER,), speed=1.3, seed=3),
    Case("slow_female", "tiny", (JAPANESE,), voice="jf_test", speed=0.8, seed=11),
    Case("deterministic", "tiny", (LONGER,), noise=False),
    Case("two_lines", "tiny", (HELLO, LONGER), seed=5),
    Case("streaming_sentences", "tiny", ("koɲɲiʨiβa.", "kʲoː no seʦɨmeː o haʥimemasɨ."), seed=9,
         streaming=True, text=JAPANESE),
    Case("unknown_symbols", "tiny", ("həlˈoʊ #wˈɜɹld§.",), seed=2),
    Case("no_affine", "tiny_plain", (LONGER,), seed=4),
    Case("real_config", "real", ("hˈɛloʊ.",), seed=5, tags=("real",)),
]
