"""The VoxCPM2 parity cases, shared by the reference run (upstream ``VoxCPM.generate``
arguments) and our side (a TaskRequest through a session).

Reference/prompt audio is written at the VAE's 16 kHz encode rate, so neither side resamples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEXT = "Hello world. 你好世界。"
DESIGN_TEXT = "(a calm, warm voice)Hello world."
PROMPT_TEXT = "This is a tiny test."


@dataclass(frozen=True)
class Case:
    name: str
    task: str = "tts"
    text: str = TEXT
    checkpoint: str = "tiny"
    reference: str | None = None  # audio file key: reference_wav_path / --voice-ref
    prompt: str | None = None  # audio file key: prompt_wav_path / prompt_audio
    prompt_text: str | None = None
    ultimate: bool = False  # --voice-ref R --reference-text T (R is reference and prompt)
    streaming: bool = False
    seed: int = 42
    options: dict[str, Any] = field(default_factory=dict)
    compute_dtype: str = "float32"  # ours; upstream computes in the checkpoint config's dtype

    def upstream_args(self, audio: dict[str, Path]) -> dict[str, Any]:
        o = {"max_tokens": 12, "min_tokens": 2, "num_inference_steps": 10, "guidance_scale": 2.0,
             "retry_badcase": False, "retry_badcase_max_times": 3, "retry_badcase_ratio_threshold": 6.0,
             **self.options}
        args: dict[str, Any] = {
            "text": self.text, "cfg_value": o["guidance_scale"],
            "inference_timesteps": o["num_inference_steps"],
            "min_len": o["min_tokens"], "max_len": o["max_tokens"], "normalize": False, "denoise": False,
            "retry_badcase": o["retry_badcase"], "retry_badcase_max_times": o["retry_badcase_max_times"],
            "retry_badcase_ratio_threshold": o["retry_badcase_ratio_threshold"],
        }
        if self.reference:
            args["reference_wav_path"] = str(audio[self.reference])
        if self.ultimate:
            args["prompt_wav_path"] = str(audio[self.reference])
            args["prompt_text"] = self.prompt_text
        if self.prompt:
            args["prompt_wav_path"] = str(audio[self.prompt])
            args["prompt_text"] = self.prompt_text
        return args

    def our_options(self, audio: dict[str, Path]) -> dict[str, Any]:
        o = {"max_tokens": 12, "min_tokens": 2, "retry_badcase": False, **self.options}
        if self.prompt:
            o["prompt_audio"] = str(audio[self.prompt])
            o["prompt_text"] = self.prompt_text
        if self.ultimate:
            o["reference_text"] = self.prompt_text
        return o


CASES: list[Case] = [
    Case("tts"),
    Case("tts_seed7_steps5", seed=7, options={"num_inference_steps": 5, "guidance_scale": 3.0,
                                              "max_tokens": 8}),
    Case("tts_long_min", options={"min_tokens": 20, "max_tokens": 30}),
    Case("tts_retry", options={"retry_badcase": True, "retry_badcase_ratio_threshold": 0.5, "max_tokens": 12,
                               "min_tokens": 20}),
    Case("design", task="design", text=DESIGN_TEXT),
    Case("clone_reference", task="clone", reference="ref"),
    Case("clone_prompt", task="clone", prompt="prompt", prompt_text=PROMPT_TEXT),
    Case("clone_ultimate", task="clone", reference="ref", ultimate=True, prompt_text=PROMPT_TEXT),
    Case("clone_both", task="clone", reference="ref", prompt="prompt", prompt_text=PROMPT_TEXT),
    Case("stream_tts", streaming=True, options={"min_tokens": 8, "max_tokens": 10}),
    Case("stream_reference", task="clone", reference="ref", streaming=True),
    Case("stream_prompt", task="clone", prompt="prompt", prompt_text=PROMPT_TEXT, streaming=True),
    Case("mup_tts", checkpoint="tiny_mup"),
    Case("mup_clone_both", checkpoint="tiny_mup", task="clone", reference="ref", prompt="prompt",
         prompt_text=PROMPT_TEXT),
]

# bfloat16 compute against upstream in bfloat16 (its default dtype for the real checkpoints):
# same operations, but bf16 rounding makes any difference in summation order visible, so these
# are drift measurements with bounds, not exactness checks.
BF16_CASES: list[Case] = [
    Case("bf16_tts", checkpoint="tiny_bf16", compute_dtype="bfloat16", options={"min_tokens": 11}),
    Case("bf16_clone_both", checkpoint="tiny_bf16", compute_dtype="bfloat16", task="clone", reference="ref",
         prompt="prompt", prompt_text=PROMPT_TEXT),
]

TOKENIZER_TEXTS = [
    "Hello world. 你好世界。", "你好，世界！ abc", "hello  world", "trailing ", "A", "tab\there",
    "(a calm voice)Hello.", "é ü ñ 全角", "你好你好世界世界。", " Hello", "Numbers 1234 & 100%",
]

# The VoxCPM1 switches of the shared modules (addition fusion, summed DiT conditioning, muP,
# AudioVAE v1, v1 prompt trimming, stateless 3-patch streaming window) against upstream's
# VoxCPMModel on a tiny v1 checkpoint. The voxcpm1 family builds on exactly these paths.
V1_CASES: list[Case] = [
    Case("v1_tts", checkpoint="tiny_v1"),
    Case("v1_prompt", checkpoint="tiny_v1", task="clone", prompt="prompt", prompt_text=PROMPT_TEXT),
    Case("v1_retry", checkpoint="tiny_v1", options={"retry_badcase": True,
                                                    "retry_badcase_ratio_threshold": 0.5,
                                                    "min_tokens": 20}),
    Case("v1_stream_tts", checkpoint="tiny_v1", streaming=True, options={"min_tokens": 8, "max_tokens": 10}),
    Case("v1_stream_prompt", checkpoint="tiny_v1", task="clone", prompt="prompt", prompt_text=PROMPT_TEXT,
         streaming=True),
]
