#!/usr/bin/env python3
"""Goldens of the Audio8 TTS parity tests, from the upstream code (run in .ref-envs/audio8).

    .ref-envs/audio8/bin/python tools/audio8_tts/reference.py [--upstream PATH] [--out tests/data/audio8_tts]

Builds the tiny checkpoint (``checkpoint.py``), writes the reference audio files, runs upstream's
``ArkttsProcessor`` and ``ArkttsModel`` (float32, CPU, one thread) for every case of :data:`CASES`
and writes ``goldens/<case>.npz`` plus ``manifest.json`` (upstream commit, sha256 of each upstream
file, versions, the cases with their parameters). The tests read the cases from the manifest.

Cases: prompt ids (tokenizer), greedy and seeded sampled generation (RAS on), cloning through the
processor (reference file read, resampled and encoded by upstream), multiple references and long
text (prompts in audio.cpp's layout given to upstream ``generate`` as ``input_ids``), a left-padded
batch, codec encode/decode (residual codes above the codebook, clamped), and the prefill logits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tools.audio8_tts.checkpoint import (  # noqa: E402
    DEFAULT_UPSTREAM,
    TINY,
    UPSTREAM_FILES,
    load_upstream,
    upstream_modules,
    write_checkpoint,
)

COMMIT = "14468db54c633e10c7ed3367bbff036d5f34eef8"
T1 = "Hello world. This is a test."
T2 = "Do you hear me? Yes, I can hear you very well."
T3 = "The quick brown fox."
R1 = "This is a tiny test."
R2 = "你好，世界。"
LONG = ("The first sentence is short. The second one, with a comma, runs a little longer than the first; "
        "then a third follows! Is there a fourth? Yes: "
        "你好，世界。今天天气很好，我们一起去公园吧！ And the end.")
LONG_CHUNKS = ["The first sentence is short.", "The second one, with a comma,",
               "runs a little longer than the first; then a third follows!",
               "Is there a fourth? Yes: 你好，世界。今天天气很好，我们一起去公园吧！ And the end."]
AUDIO = {"ref_24k.wav": (1, 0.30, 24000), "ref2_44k.wav": (2, 0.20, 44100), "codec_in.wav": (3, 0.25, 44100)}
REF1 = {"audio": "ref_24k.wav", "text": R1}
REF2 = {"audio": "ref2_44k.wav", "text": R2}

CASES: list[dict[str, Any]] = [
    {"name": "tokenize", "kind": "tokenize",
     "texts": [T1, T2, "你好，世界！ abc", "  spaced   out\ttext \n", "<|speaker:3|>tagged"],
     "reference_texts": [R1, "<|speaker:3|>tagged", "  a  b "]},
    {"name": "forward", "kind": "forward", "text": T1},
    {"name": "tts_greedy", "kind": "generate", "text": T1, "do_sample": False, "max_new_tokens": 16},
    {"name": "tts_sampled", "kind": "generate", "text": T1, "seed": 7, "max_new_tokens": 30},
    {"name": "tts_sampled_capped", "kind": "generate", "text": T1, "seed": 1, "max_new_tokens": 20},
    {"name": "tts_sampled_k5", "kind": "generate", "text": T3, "seed": 9, "max_new_tokens": 30,
     "temperature": 1.0, "top_k": 5, "top_p": 0.8},
    {"name": "clone_sampled", "kind": "generate", "text": T2, "references": [REF1], "seed": 4,
     "max_new_tokens": 30},
    {"name": "clone_greedy", "kind": "generate", "text": T3, "references": [REF1], "do_sample": False,
     "max_new_tokens": 12},
    {"name": "multi_reference", "kind": "generate", "text": T1, "references": [REF1, REF2], "seed": 8,
     "max_new_tokens": 30},
    {"name": "long_form", "kind": "long_form", "text": LONG, "chunks": LONG_CHUNKS, "text_chunk_size": 60,
     "seed": 5, "max_new_tokens": 10},
    {"name": "long_form_clone", "kind": "long_form", "text": LONG, "chunks": LONG_CHUNKS,
     "text_chunk_size": 60, "references": [REF1], "seed": 9, "max_new_tokens": 8},
    {"name": "batch_greedy", "kind": "batch", "texts": [T1, T3], "do_sample": False, "max_new_tokens": 10},
    {"name": "batch_sampled", "kind": "batch", "texts": [T1, T3], "seed": 11, "max_new_tokens": 24},
    {"name": "codec", "kind": "codec", "audio": "codec_in.wav"},
]
DEFAULTS = {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 50, "seed": 0}


def voice_like(seed: int, seconds: float, rate: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = rng.uniform(120, 300)
    wave = 0.4 * np.sin(2 * np.pi * f0 * t) + 0.2 * np.sin(2 * np.pi * 2.3 * f0 * t + 0.5)
    wave *= 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    return (wave + rng.normal(0, 0.02, t.size)).astype(np.float32)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Runner:
    def __init__(self, up: Any, folder: Path, audio_dir: Path) -> None:
        import torch

        self.torch, self.up, self.audio_dir = torch, up, audio_dir
        self.model = load_upstream(folder, up)
        self.processor = up.processing.ArkttsProcessor.from_pretrained(str(folder))
        self.cfg = self.model.config

    def gen_kwargs(self, case: dict[str, Any]) -> dict[str, Any]:
        o = {**DEFAULTS, **case}
        generator = self.torch.Generator().manual_seed(int(o["seed"])) if o["do_sample"] else None
        return {"max_new_tokens": o["max_new_tokens"], "temperature": o["temperature"], "top_p": o["top_p"],
                "top_k": o["top_k"], "do_sample": o["do_sample"], "generator": generator,
                "return_dict_in_generate": True}

    def ref_codes(self, ref: dict[str, str]) -> Any:
        audio = self.processor._load_audio(str(self.audio_dir / ref["audio"]), None)
        codes, lengths = self.model.encode_audio(audio[None, None], self.torch.tensor([audio.numel()]))
        return codes[0, :, : int(lengths[0])]

    def prompt(self, text: str, refs: list[dict[str, str]], previous: tuple[str, Any] | None) -> Any:
        """A prompt in audio.cpp's multi-reference / previous-turn layout, from upstream's tokenizer."""
        torch, enc, cfg = self.torch, self.processor._encode, self.cfg
        pieces: list[tuple[str, Any]] = []  # ("ids", tensor) or ("codes", [10, T])
        if refs:
            parts = ["<|im_start|>system\n",
                     "convert the provided text to speech reference to the following:\n\nText:\n"]
            for i, ref in enumerate(refs):
                parts += (["\n"] if i else []) + [f"<|speaker:{i}|>" + " ".join(ref["text"].split())]
            pieces += [("ids", enc(p)) for p in parts + ["\n\nSpeech:\n"]]
            pieces += [("codes", self.ref_codes(r)) for r in refs]
            pieces.append(("ids", enc("<|im_end|>\n")))
        else:
            pieces += [("ids", enc(p)) for p in ("<|im_start|>system\n",
                                                 "convert the provided text to speech", "<|im_end|>\n")]
        if previous is not None:
            pieces += [("ids", enc(p)) for p in ("<|im_start|>user\n", " ".join(previous[0].split()),
                                                 "<|im_end|>\n", "<|im_start|>assistant\n<|voice|>")]
            pieces += [("codes", previous[1]), ("ids", enc("<|im_end|>\n"))]
        pieces += [("ids", enc(p)) for p in ("<|im_start|>user\n", " ".join(text.split()), "<|im_end|>\n",
                                             "<|im_start|>assistant\n<|voice|>")]
        columns = []
        for kind, value in pieces:
            col = torch.zeros((cfg.num_codebooks + 1, value.shape[-1]), dtype=torch.long)
            if kind == "ids":
                col[0] = value
            else:
                col[0] = value[0] + cfg.semantic_begin_id
                col[1:] = value
            columns.append(col)
        return torch.cat(columns, dim=1)[None]

    def generate(self, case: dict[str, Any]) -> dict[str, Any]:
        refs = case.get("references", [])
        if len(refs) == 1:  # the processor's own path: audio read, resampled, encoded by upstream
            inputs = self.processor(text=case["text"], reference_text=refs[0]["text"],
                                    reference_audio=str(self.audio_dir / refs[0]["audio"]))
        elif refs:
            prompt = self.prompt(case["text"], refs, None)
            inputs = {"input_ids": prompt,
                      "attention_mask": self.torch.ones(prompt.shape[0], prompt.shape[-1],
                                                        dtype=self.torch.long)}
        else:
            inputs = self.processor(text=case["text"])
        prompt, mask = self.model._prepare_prompt(**inputs)
        out = self.model.generate(**inputs, **self.gen_kwargs(case))
        wav, lengths = self.model.decode_audio(out.codes)
        return {"prompt": prompt[0].numpy(), "codes": out.codes[0].numpy(), "finished": out.finished.numpy(),
                "wav": wav[0, : int(lengths[0])].numpy()}

    def long_form(self, case: dict[str, Any]) -> dict[str, Any]:
        kwargs = self.gen_kwargs(case)
        refs = case.get("references", [])
        previous = None
        out: dict[str, Any] = {}
        wavs = []
        for i, chunk in enumerate(case["chunks"]):
            prompt = self.prompt(chunk, refs, previous)
            result = self.model.generate(input_ids=prompt,
                                         attention_mask=self.torch.ones(1, prompt.shape[-1],
                                                                        dtype=self.torch.long),
                                         **kwargs)
            codes = result.codes[0]
            wav, lengths = self.model.decode_audio(result.codes)
            wavs.append(wav[0, : int(lengths[0])].numpy())
            out[f"prompt_{i}"], out[f"codes_{i}"] = prompt[0].numpy(), codes.numpy()
            previous = (chunk, codes) if codes.shape[-1] else previous
        out["wav"] = np.concatenate(wavs)
        return out

    def batch(self, case: dict[str, Any]) -> dict[str, Any]:
        inputs = self.processor(text=case["texts"])
        prompt, mask = self.model._prepare_prompt(**inputs)
        out = self.model.generate(**inputs, **self.gen_kwargs(case))
        return {"prompt": prompt.numpy(), "mask": mask.numpy(), "codes": out.codes.numpy(),
                "code_lengths": out.code_lengths.numpy(), "finished": out.finished.numpy()}

    def codec(self, case: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        codec = self.model.load_codec()
        audio = self.processor._load_audio(str(self.audio_dir / case["audio"]), None)
        codes, lengths = codec.encode(audio[None, None], torch.tensor([audio.numel()]))
        decoded = codec.decode(codes)
        gen = torch.Generator().manual_seed(3)
        wild = torch.randint(0, self.cfg.codebook_size, (1, self.cfg.num_codebooks, 5), generator=gen)
        return {"codes": codes[0].numpy(), "code_lengths": lengths.numpy(), "decoded": decoded[0, 0].numpy(),
                "wild_codes": wild[0].numpy(), "wild_decoded": codec.decode(wild)[0, 0].numpy()}

    def forward(self, case: dict[str, Any]) -> dict[str, Any]:
        inputs = self.processor(text=case["text"])
        prompt, mask = self.model._prepare_prompt(**inputs)
        with self.torch.inference_mode():
            out = self.model(input_ids=prompt, attention_mask=mask)
        return {"prompt": prompt[0].numpy(), "logits": out.logits[0, -1].numpy(),
                "hidden": out.hidden_states[0].numpy()}

    def tokenize(self, case: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for i, text in enumerate(case["texts"]):
            full, _ = self.processor._prompt_segments(text, None, False)
            out[f"tts_{i}"] = full.numpy()
        for i, ref in enumerate(case["reference_texts"]):
            prefix, suffix = self.processor._prompt_segments(T1, ref, True)
            out[f"prefix_{i}"], out[f"suffix_{i}"] = prefix.numpy(), suffix.numpy()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, default=DEFAULT_UPSTREAM,
                        help="Audio8_TTS checkout (at 14468db)")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "audio8_tts")
    parser.add_argument("--commit", default=COMMIT, help="the upstream commit the checkout is at")
    args = parser.parse_args()
    import soundfile as sf
    import torch
    import transformers

    torch.set_num_threads(1)
    up = upstream_modules(args.upstream)
    out = args.out
    for sub in ("tiny", "audio", "goldens"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    folder = write_checkpoint(out / "tiny", up, TINY, seed=0)
    for name, (seed, seconds, rate) in AUDIO.items():
        sf.write(out / "audio" / name, voice_like(seed, seconds, rate), rate, subtype="FLOAT")
    runner = Runner(up, folder, out / "audio")
    summary = {}
    for case in CASES:
        result = getattr(runner, case["kind"])(case)
        np.savez_compressed(out / "goldens" / f"{case['name']}.npz", **result)
        summary[case["name"]] = {k: list(np.shape(v)) for k, v in result.items()}
        print(case["name"], summary[case["name"]], file=sys.stderr)
    manifest = {
        "upstream": {"repository": "Audio8-AI/Audio8_TTS", "commit": args.commit,
                     "files": {f"model/audio8_tts_0_6B_preview/{f}": sha256(up.root / f)
                               for f in UPSTREAM_FILES}},
        "generated_by": "tools/audio8_tts/reference.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version(), "numpy": np.__version__},
        "defaults": DEFAULTS,
        "cases": CASES,
        "shapes": summary,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    print(json.dumps({"cases": [c["name"] for c in CASES], "out": str(out)}))


if __name__ == "__main__":
    main()
