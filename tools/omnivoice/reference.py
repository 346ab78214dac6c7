#!/usr/bin/env python3
"""Run upstream OmniVoice (PyPI omnivoice 0.2.1) on a list of cases and dump everything the
parity tests compare. Runs in the reference env (``.ref-envs/omnivoice``).

Usage: python tools/omnivoice/reference.py CHECKPOINT_DIR CASES.json OUT_DIR

CASES.json is a list of objects: ``name``, ``text``, optional ``language``, ``instruct``,
``ref_audio`` (a file path), ``ref_text``, ``duration``, ``speed``, ``seed`` (default 0),
``voice_prompt_out`` (save upstream's VoiceClonePrompt there), and ``config`` (generation
config fields). For each case OUT_DIR/<name>.npz holds: ``target_lens`` (per
``_generate_iterative`` call), ``tokens_<i>`` (each call's tokens), ``step0_input_ids``,
``step0_audio_mask``, ``step0_attention_mask``, ``step0_logits`` (the first forward pass),
``ref_codes`` and ``encode_input`` (when a reference was encoded), ``decode_<i>`` (each raw
decode) and ``audio`` (the final output). One JSON line is printed last.

A case with ``batch`` (a list of items with the fields above, ``text`` required) runs upstream's
own batch: one ``generate`` call with lists; OUT_DIR/<name>.npz then holds ``target_lens``,
``tokens_<i>`` and ``audio_<i>`` per item.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(argv: list[str]) -> int:
    from omnivoice import OmniVoice
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    ckpt, cases_path, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    cases = json.loads(cases_path.read_text())
    model = OmniVoice.from_pretrained(str(ckpt), dtype=torch.float32).eval()
    record: dict[str, list] = {}

    orig_forward = model.forward
    orig_iter = model._generate_iterative
    codec = model.audio_tokenizer
    orig_encode, orig_decode = codec.encode, codec.decode

    def forward(*args, **kwargs):
        result = orig_forward(*args, **kwargs)
        if not record["forward"]:
            record["forward"].append({
                "input_ids": kwargs["input_ids"].clone(), "audio_mask": kwargs["audio_mask"].clone(),
                "attention_mask": kwargs["attention_mask"].clone(), "logits": result.logits.detach().clone(),
            })
        return result

    def generate_iterative(task, gen_config):
        tokens = orig_iter(task, gen_config)
        record["iter"].append((list(task.target_lens), [t.clone() for t in tokens]))
        return tokens

    def encode(input_values, *args, **kwargs):
        result = orig_encode(input_values, *args, **kwargs)
        record["encode"].append((input_values.detach().clone(), result.audio_codes.clone()))
        return result

    def decode(codes, *args, **kwargs):
        result = orig_decode(codes, *args, **kwargs)
        record["decode"].append(result.audio_values.detach().clone())
        return result

    model.forward = forward
    model._generate_iterative = generate_iterative
    codec.encode, codec.decode = encode, decode

    summary = {}
    for case in cases:
        record.update(forward=[], iter=[], encode=[], decode=[])
        if "batch" in case:
            summary[case["name"]] = run_batch(model, case, record, out, OmniVoiceGenerationConfig)
            continue
        seed = int(case.get("seed", 0))
        kwargs = dict(case.get("config", {}))
        gen_config = OmniVoiceGenerationConfig.from_dict(kwargs)
        voice_prompt = None
        if case.get("voice_prompt_in"):
            from omnivoice.models.omnivoice import VoiceClonePrompt

            voice_prompt = VoiceClonePrompt.load(case["voice_prompt_in"])
        if case.get("voice_prompt_out"):  # before seeding: encoding draws from the global RNG (HuBERT)
            prompt = model.create_voice_clone_prompt(case["ref_audio"], ref_text=case.get("ref_text"),
                                                     preprocess_prompt=gen_config.preprocess_prompt)
            prompt.save(case["voice_prompt_out"])
            record.update(encode=[])
        torch.manual_seed(seed)
        start = time.perf_counter()
        audio = model.generate(
            text=case["text"], language=case.get("language"), ref_text=case.get("ref_text"),
            ref_audio=case.get("ref_audio"), voice_clone_prompt=voice_prompt, instruct=case.get("instruct"),
            duration=case.get("duration"), speed=case.get("speed"), generation_config=gen_config,
        )[0]
        wall = time.perf_counter() - start
        arrays: dict[str, np.ndarray] = {"audio": np.asarray(audio, dtype=np.float32)}
        lens: list[int] = []
        chunk = 0
        for target_lens, tokens in record["iter"]:
            lens.extend(target_lens)
            for t in tokens:
                arrays[f"tokens_{chunk}"] = t.numpy().astype(np.int64)
                chunk += 1
        arrays["target_lens"] = np.asarray(lens, dtype=np.int64)
        if record["forward"]:
            f = record["forward"][0]
            arrays.update(step0_input_ids=f["input_ids"].numpy(), step0_audio_mask=f["audio_mask"].numpy(),
                          step0_attention_mask=f["attention_mask"].numpy(),
                          step0_logits=f["logits"].float().numpy())
        if record["encode"]:
            arrays["encode_input"] = record["encode"][0][0].numpy()
            arrays["ref_codes"] = record["encode"][0][1].numpy().astype(np.int64)
        for i, d in enumerate(record["decode"]):
            arrays[f"decode_{i}"] = d.numpy()
        np.savez(out / f"{case['name']}.npz", **arrays)
        summary[case["name"]] = {"target_lens": lens, "num_chunks": chunk,
                                 "samples": int(arrays["audio"].shape[0]), "wall_s": round(wall, 3)}
    print(json.dumps({"cases": summary, "transformers": __import__("transformers").__version__,
                      "torch": torch.__version__}))
    return 0


def run_batch(model, case: dict, record: dict, out: Path, config_class) -> dict:
    """Upstream's batch: one ``generate`` call with a list per argument."""
    items = case["batch"]
    gen_config = config_class.from_dict(dict(case.get("config", {})))

    def column(key: str) -> list | None:
        values = [item.get(key) for item in items]
        return None if all(v is None for v in values) else values

    torch.manual_seed(int(case.get("seed", 0)))
    audios = model.generate(text=[item["text"] for item in items], language=column("language"),
                            ref_text=column("ref_text"), ref_audio=column("ref_audio"),
                            instruct=column("instruct"), duration=column("duration"), speed=column("speed"),
                            generation_config=gen_config)
    arrays: dict[str, np.ndarray] = {}
    lens: list[int] = []
    for target_lens, tokens in record["iter"]:
        for n, t in zip(target_lens, tokens):
            arrays[f"tokens_{len(lens)}"] = t.numpy().astype(np.int64)
            lens.append(int(n))
    arrays["target_lens"] = np.asarray(lens, dtype=np.int64)
    for i, audio in enumerate(audios):
        arrays[f"audio_{i}"] = np.asarray(audio, dtype=np.float32)
    np.savez(out / f"{case['name']}.npz", **arrays)
    return {"target_lens": lens, "items": len(items), "iterative_calls": len(record["iter"])}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
