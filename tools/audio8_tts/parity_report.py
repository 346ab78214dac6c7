#!/usr/bin/env python3
"""Print the Audio8 TTS parity and drift figures against the committed goldens (upstream 14468db).

    .venv/bin/python tools/audio8_tts/parity_report.py [--goldens tests/data/audio8_tts]

Per case: prompt ids equal, codes identical, audio length and cosine; codec encode/decode; the
prefill logits' max |diff|; streaming vs offline; the folder vs our F32 package vs audio.cpp's layout;
Q8_0 / BF16 / F16 packages and ``compute_dtype=bfloat16`` against float32 (first-step logits, greedy
code agreement, audio cosine). The figures quoted in docs/families/audio8_tts.md come from here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from audiocpp.engine.records import TaskRequest  # noqa: E402
from audiocpp.families.audio8_tts import plugin  # noqa: E402
from tests.audio8_tts.cases import cosine, generate_cases, request_for  # noqa: E402

TEXT = "Hello world. This is a test."


def run(model, case, manifest, audio_dir, mode="offline"):
    task, request = request_for(case, manifest["defaults"], audio_dir)
    return model.session(task, mode, compute_dtype="float32").run(request)


def generation(model, manifest, goldens: Path) -> None:
    print("== generation vs upstream (codes identical, audio cosine)")
    for case in generate_cases(manifest):
        ref = dict(np.load(goldens / "goldens" / f"{case['name']}.npz"))
        result = run(model, case, manifest, goldens / "audio")
        d = result.details
        if case["kind"] == "generate":
            prompts = np.array_equal(d["prompts"][0], ref["prompt"])
            codes = np.array_equal(d["codes"][0], ref["codes"])
            frames = d["codes"][0].shape[1]
        else:
            n = len(case["chunks"])
            prompts = all(np.array_equal(d["prompts"][i], ref[f"prompt_{i}"]) for i in range(n))
            codes = all(np.array_equal(d["codes"][i], ref[f"codes_{i}"]) for i in range(n))
            frames = sum(c.shape[1] for c in d["codes"])
        same = result.audio.samples.shape == ref["wav"].shape
        cos = cosine(result.audio.samples, ref["wav"]) if same else float("nan")
        eos = "EOS" if all(d["finished"]) else "cap"
        print(f"  {case['name']:20s} prompt ids {'equal' if prompts else 'DIFFER'}, codes "
              f"{'identical' if codes else 'DIFFER'} ({frames} frames, {eos}), "
              f"audio {'same length' if same else 'LENGTH'}"
              f", cosine {cos:.9f}")
        if case["name"] in ("tts_sampled", "clone_sampled", "long_form"):
            streamed = run(model, case, manifest, goldens / "audio", "streaming").audio.samples
            print(f"  {'':20s} streaming vs offline: "
                  f"max |diff| {np.abs(streamed - result.audio.samples).max():.2e}, "
                  f"cosine {cosine(streamed, result.audio.samples):.10f}")


def codec_and_logits(model, goldens: Path) -> None:
    from audiocpp.engine.audio.io import read_audio
    from audiocpp.engine.audio.resample import resample

    ref = dict(np.load(goldens / "goldens" / "codec.npz"))
    audio = read_audio(goldens / "audio" / "codec_in.wav")
    codes = model.parts.codec.encode(torch.from_numpy(resample(audio.samples, audio.sample_rate,
                                                               44100))[None, None])
    decoded = model.parts.codec.decode(torch.from_numpy(ref["codes"])[None])[0, 0].numpy()
    wild = model.parts.codec.decode(torch.from_numpy(ref["wild_codes"])[None])[0, 0].numpy()
    print(f"== codec: encode codes "
          f"{'identical' if np.array_equal(codes[0].numpy(), ref['codes']) else 'DIFFER'}, "
          f"decode cosine {cosine(decoded, ref['decoded']):.9f} "
          f"(max |diff| {np.abs(decoded - ref['decoded']).max():.1e})"
          f", clamped residual codes cosine {cosine(wild, ref['wild_decoded']):.9f}")
    fwd = dict(np.load(goldens / "goldens" / "forward.npz"))
    logits = first_logits(model, torch.float32, torch.from_numpy(fwd["prompt"])[None], compact=False)
    print(f"== prefill logits vs upstream forward: "
          f"max |diff| {np.abs(logits.numpy() - fwd['logits']).max():.2e} "
          f"(of max |logit| {np.abs(fwd['logits']).max():.2f})")


def first_logits(model, dtype, prompt, *, compact=True):
    net = model.model_for(dtype)
    mask = torch.ones(1, prompt.shape[-1], dtype=torch.long)
    with torch.inference_mode():
        net.setup(1, prompt.shape[-1] + 1)
        hidden = net.slow.prefill(net.slow.embed(prompt), mask.cumsum(-1) - 1, mask)
        return net.slow.semantic_logits(hidden.logits_input, compact=compact)[0].float()


def synth(model, **options):
    dtype = options.pop("compute_dtype", "float32")
    result = model.session("tts", compute_dtype=dtype).run(
        TaskRequest(text=TEXT, seed=7, options={"max_new_tokens": 30, **options}))
    return result.details["codes"][0], result.audio.samples


def drift(model, goldens: Path) -> None:
    from audiocpp.engine.packaging import plan_from_spec, write_package
    from tools.audio8_tts.convert_audiocpp import write_audiocpp_package

    tiny = goldens / "tiny"
    base_codes, base_audio = synth(model, do_sample=False)
    prompt = model.session("tts").builder.build(TEXT)[None]
    base_logits = first_logits(model, torch.float32, prompt)
    print("== load paths and reduced precision (greedy, 30 frames; vs the folder in float32)")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for wtype in ("f32", "q8_0", "bf16", "f16"):
            paths[wtype] = Path(tmp) / f"{wtype}.gguf"
            write_package(plan_from_spec(plugin.spec, {"": tiny}), paths[wtype], wtype)
        paths["audio.cpp f32"] = write_audiocpp_package(tiny, Path(tmp) / "audiocpp.gguf", "f32")
        for name, path in paths.items():
            other = plugin.load(path)
            report(name, other, base_codes, base_audio, base_logits, prompt, torch.float32,
                   path.stat().st_size)
    report("compute bfloat16", model, base_codes, base_audio, base_logits, prompt, torch.bfloat16, None)


def report(name, model, base_codes, base_audio, base_logits, prompt, dtype, size) -> None:
    codes, audio = synth(model, do_sample=False,
                         compute_dtype={torch.float32: "float32"}.get(dtype, "bfloat16"))
    logits = first_logits(model, dtype, prompt)
    n = min(codes.shape[1], base_codes.shape[1])
    agree = float(np.mean(codes[:, :n] == base_codes[:, :n]))
    first_mismatch = next((i for i in range(n) if not np.array_equal(codes[:, i], base_codes[:, i])), None)
    cos = cosine(audio[: len(base_audio)], base_audio[: len(audio)])
    extra = f", {size / 1024:.0f} KiB" if size else ""
    print(f"  {name:18s} first-step logits max |diff| {(logits - base_logits).abs().max().item():.2e}; "
          f"codes agree {agree:.3f} (first different frame: {first_mismatch}); audio cosine {cos:.6f}, "
          f"max |diff| {np.abs(audio[:len(base_audio)] - base_audio[:len(audio)]).max():.1e}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goldens", type=Path, default=REPO / "tests" / "data" / "audio8_tts")
    args = parser.parse_args()
    torch.set_num_threads(1)
    manifest = json.loads((args.goldens / "manifest.json").read_text(encoding="utf-8"))
    print(f"upstream {manifest['upstream']['repository']}@{manifest['upstream']['commit'][:7]}, goldens by "
          f"torch {manifest['versions']['torch']} / transformers {manifest['versions']['transformers']}")
    model = plugin.load(args.goldens / "tiny")
    generation(model, manifest, args.goldens)
    codec_and_logits(model, args.goldens)
    drift(model, args.goldens)


if __name__ == "__main__":
    main()
