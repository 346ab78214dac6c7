"""The VoxCPM1 parity cases, shared by the reference run (upstream ``VoxCPM.generate`` arguments),
our side (a TaskRequest through a voxcpm1 session) and tools/voxcpm1/parity_report.py.

Two tiny checkpoints (tools/voxcpm1/checkpoint.py): ``tiny_05b`` (VoxCPM-0.5B layout and
geometry: pytorch_model.bin, patch 2, 16 kHz) and ``tiny_15`` (VoxCPM1.5: model.safetensors,
patch 4, 44.1 kHz, VAE strides [2,3,6,7,7]). Prompt audio is written at each model's encode rate,
so neither side resamples (the reference env's torchaudio stand-in refuses to).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.support import voice_like_signal

REPO = Path(__file__).resolve().parents[2]
TEXT = "Hello world. 你好世界。"
PROMPT_TEXT = "This is a tiny test."
LATENT_TOL = 1e-5
MIN_COSINE = 0.99999
RATES = {"tiny_05b": 16000, "tiny_15": 44100}
SEEDS = {"tiny_05b": 99, "tiny_15": 74}
STOP_TIE = 0.01  # near-tie stop head: the stop step is exercised (tools/voxcpm1/checkpoint.py)


@dataclass(frozen=True)
class Case:
    name: str
    checkpoint: str
    task: str = "tts"
    text: str = TEXT
    prompt: str | None = None  # audio file key: prompt_wav_path / --voice-ref
    prompt_text: str | None = None  # prompt_text / --reference-text
    streaming: bool = False
    seed: int = 42
    options: dict[str, Any] = field(default_factory=dict)

    def merged(self) -> dict[str, Any]:
        return {"max_tokens": 12, "min_tokens": 2, "num_inference_steps": 10, "guidance_scale": 2.0,
                "retry_badcase": False, "retry_badcase_max_times": 3, "retry_badcase_ratio_threshold": 6.0,
                **self.options}

    def upstream_args(self, audio: dict[str, Path]) -> dict[str, Any]:
        o = self.merged()
        args: dict[str, Any] = {
            "text": self.text, "cfg_value": o["guidance_scale"],
            "inference_timesteps": o["num_inference_steps"],
            "min_len": o["min_tokens"], "max_len": o["max_tokens"], "normalize": False, "denoise": False,
            "retry_badcase": o["retry_badcase"], "retry_badcase_max_times": o["retry_badcase_max_times"],
            "retry_badcase_ratio_threshold": o["retry_badcase_ratio_threshold"],
        }
        if self.prompt:
            args["prompt_wav_path"] = str(audio[self.prompt])
            args["prompt_text"] = self.prompt_text
        return args

    def request(self, audio: dict[str, Path]):
        from audiocpp.engine.records import TaskRequest, VoiceReference

        voice = VoiceReference(path=audio[self.prompt]) if self.prompt else None
        return TaskRequest(text=self.text, seed=self.seed, voice=voice, reference_text=self.prompt_text,
                           options=self.merged())


def _cases(ck: str, prompt: str) -> list[Case]:
    clone = {"task": "clone", "prompt": prompt, "prompt_text": PROMPT_TEXT}
    return [
        Case(f"{ck}:tts", ck),
        Case(f"{ck}:tts_seed7_steps5", ck, seed=7,
             options={"num_inference_steps": 5, "guidance_scale": 3.0, "max_tokens": 8}),
        Case(f"{ck}:tts_long_min", ck, options={"min_tokens": 20, "max_tokens": 30}),
        Case(f"{ck}:tts_retry", ck, options={"retry_badcase": True, "retry_badcase_ratio_threshold": 0.5,
                                             "min_tokens": 20}),
        Case(f"{ck}:clone", ck, **clone),
        # 16 generated patches < 2.5 x 7 target tokens <= 16 + 2 context patches: a bad case only
        # because v1 counts the prompt's context patches, as upstream does.
        Case(f"{ck}:clone_retry", ck, **clone, options={"retry_badcase": True,
                                                        "retry_badcase_ratio_threshold": 2.5,
                                                        "min_tokens": 20, "max_tokens": 16}),
        Case(f"{ck}:stream_tts", ck, streaming=True, options={"min_tokens": 8, "max_tokens": 10}),
        Case(f"{ck}:stream_clone", ck, streaming=True, **clone),
    ]


CASES: list[Case] = [
    *_cases("tiny_05b", "prompt16k"),
    Case("tiny_05b:tts_parenthesis", "tiny_05b", text="(not a description)Hello there."),
    *_cases("tiny_15", "prompt44k"),
    # A prompt shorter than one patch (7056 samples): one context patch, but upstream still trims
    # two patches of audio from the offline output.
    Case("tiny_15:clone_short_prompt", "tiny_15", task="clone", prompt="short44k", prompt_text=PROMPT_TEXT),
    Case("tiny_15:stream_short_prompt", "tiny_15", task="clone", prompt="short44k", prompt_text=PROMPT_TEXT,
         streaming=True),
]
CASE_BY_NAME = {c.name: c for c in CASES}
TOKENIZER_TEXTS = [
    "Hello world. 你好世界。", "你好，世界！ abc", "hello  world", "trailing ", "A", "tab\there",
    "(a calm voice)Hello.", "é ü ñ 全角", "你好你好世界世界。", "Numbers 1234 & 100%",
]




def write_audio(root: Path) -> dict[str, Path]:
    """Float WAVs at the models' encode rates (lengths not a whole number of patches)."""
    import soundfile as sf

    root.mkdir(parents=True, exist_ok=True)
    table = {"prompt16k": (2, 1001, 16000), "vae16k": (3, 980, 16000), "prompt44k": (4, 10000, 44100),
             "short44k": (5, 5000, 44100), "vae44k": (6, 9000, 44100)}
    out = {}
    for key, (seed, n, rate) in table.items():
        out[key] = root / f"{key}.wav"
        sf.write(out[key], voice_like_signal(seed, n, rate), rate, subtype="FLOAT")
    stereo = np.stack([voice_like_signal(7, 3000, 22050), voice_like_signal(8, 3000, 22050)], axis=1)
    out["stereo22k"] = root / "stereo22k.wav"
    sf.write(out["stereo22k"], stereo, 22050, subtype="FLOAT")
    return out


def write_checkpoints(root: Path) -> dict[str, Path]:
    from tools.voxcpm1 import checkpoint as ck

    return {
        "tiny_05b": ck.write_v1_checkpoint(root / "tiny_05b", ck.TINY_05B, seed=SEEDS["tiny_05b"],
                                           weights="bin", stop_tie=STOP_TIE),
        "tiny_15": ck.write_v1_checkpoint(root / "tiny_15", ck.TINY_15, seed=SEEDS["tiny_15"],
                                          weights="safetensors", stop_tie=STOP_TIE),
    }


def reference_cases(audio: dict[str, Path]) -> list[dict[str, Any]]:
    """Every upstream job: the generate cases, a VAE round trip per checkpoint, the tokenizer."""
    jobs: list[dict[str, Any]] = [
        {"name": c.name.replace(":", "__"), "checkpoint": c.checkpoint, "kind": "generate", "seed": c.seed,
         "streaming": c.streaming, "args": c.upstream_args(audio)} for c in CASES
    ]
    jobs.append({"name": "tiny_05b__vae", "checkpoint": "tiny_05b", "kind": "vae",
                 "wav": str(audio["vae16k"])})
    jobs.append({"name": "tiny_15__vae", "checkpoint": "tiny_15", "kind": "vae", "wav": str(audio["vae44k"])})
    jobs.append({"name": "tokenize", "checkpoint": "tiny_05b", "kind": "tokenize", "texts": TOKENIZER_TEXTS})
    return jobs


def run_ours(model, case: Case, audio: dict[str, Path]):
    """(final result, streamed audio pieces) of ``case`` through a voxcpm1 session."""
    session = model.session(case.task, "streaming" if case.streaming else "offline")
    pieces, result = [], None
    for event in session.stream(case.request(audio)):
        if event.is_final:
            result = event.result
        else:
            pieces.append(event.audio.samples)
    assert result is not None
    return result, pieces


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def compare(case: Case, result, pieces: list[np.ndarray], ref: dict[str, np.ndarray]) -> dict[str, Any]:
    """Our result against upstream's: the figures the tests bound and the report prints.

    Upstream v1's offline latents include the prompt's context patches (up to 2); ours report the
    generated patches only, so the comparison drops upstream's leading context patches."""
    latents = result.details["latents"][0]
    expected = ref["patches"]
    context = 0
    if case.prompt and not case.streaming:
        context = len(expected) - len(latents)
        expected = expected[context:]
    same_shape = latents.shape == expected.shape
    audio = result.audio.samples
    return {
        "patches": len(latents), "upstream_patches": len(ref["patches"]), "context": context,
        "attempts": result.details["attempts"][0], "upstream_attempts": int(ref["runs"]),
        "latent_diff": (float(np.abs(latents - expected).max()) if same_shape and len(latents)
                        else float("nan")),
        "same_shape": same_shape, "audio_len": len(audio), "upstream_audio_len": len(ref["wav"]),
        "cosine": cosine(audio, ref["wav"]) if audio.shape == ref["wav"].shape else float("nan"),
        "chunk_lengths": [len(p) for p in pieces], "upstream_chunk_lengths": ref["chunk_lengths"].tolist(),
    }
