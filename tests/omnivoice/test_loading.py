"""The three OmniVoice layouts give the same audio for the same weights (snapshot folder,
package GGUF at F32, omnivoice.cpp's two GGUFs), and the quantized ones load and stay close."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.errors import UsageError
from audiocpp.engine.records import TaskRequest, VoiceReference
from audiocpp.engine.registry import detect_family, get_family
from tests.omnivoice.cases import reference_tone, write_references
from tests.support import REPO, run_cli

CONVERTER = REPO / "tools" / "omnivoice" / "convert_omnivoice_cpp.py"
TEXTS = ("Nice to meet you.", "Hello world, this is a slightly longer test sentence.", "One, two, three.")


def package(snapshot: Path, out: Path, kind: str) -> Path:
    proc = run_cli("package", "--spec", REPO / "model_specs" / "omnivoice.json", "--input", snapshot,
                   "--type", kind, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


def omnivoice_cpp(snapshot: Path, out: Path, kind: str = "f32") -> tuple[Path, Path]:
    proc = subprocess.run([sys.executable, str(CONVERTER), str(snapshot), str(out), "--type", kind],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out / f"omnivoice-base-{kind.upper()}.gguf", out / "omnivoice-tokenizer-F32.gguf"


@pytest.fixture(scope="module")
def layouts(ov_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("omnivoice-layouts")
    lm, _ = omnivoice_cpp(ov_snapshot, work / "cpp")
    lm_q8, _ = omnivoice_cpp(ov_snapshot, work / "cpp_q8", "q8_0")
    return {
        "folder": ov_snapshot,
        "package_f32": package(ov_snapshot, work / "omnivoice-f32.gguf", "f32"),
        "package_q8_0": package(ov_snapshot, work / "omnivoice-q8_0.gguf", "q8_0"),
        "package_bf16": package(ov_snapshot, work / "omnivoice-bf16.gguf", "bf16"),
        "cpp_f32": lm,
        "cpp_q8_0": lm_q8,
        "refs": write_references(work / "refs")["ref24k"],
    }


def requests(ref: Path) -> list[tuple[str, TaskRequest]]:
    return [
        ("tts", TaskRequest(text=TEXTS[0], options={"num_inference_steps": 8, "seed": 3})),
        ("design", TaskRequest(text=TEXTS[1], instruct="female, high pitch", language="en",
                               options={"num_inference_steps": 8, "seed": 4})),
        ("clone", TaskRequest(text=TEXTS[2], voice=VoiceReference(path=ref), reference_text="Hello there",
                              options={"num_inference_steps": 8, "seed": 5})),
    ]


def run_all(path: Path, ref: Path, **load_options) -> list:
    model = get_family("omnivoice").load(path, load_options)
    return [model.session(task).run(req) for task, req in requests(ref)]


def test_three_layouts_give_identical_audio(layouts):
    base = run_all(layouts["folder"], layouts["refs"])
    for name in ("package_f32", "cpp_f32"):
        other = run_all(layouts[name], layouts["refs"])
        for a, b in zip(base, other):
            assert np.array_equal(a.audio.samples, b.audio.samples), name
            assert all(np.array_equal(x, y) for x, y in zip(a.details["tokens"], b.details["tokens"]))


def test_layouts_are_detected(layouts):
    for name in ("folder", "package_f32", "cpp_f32"):
        assert detect_family(layouts[name]).name == "omnivoice"


def test_codec_given_explicitly_or_paired(layouts, tmp_path):
    lm = layouts["cpp_f32"]
    codec = lm.parent / "omnivoice-tokenizer-F32.gguf"
    explicit = run_all(lm, layouts["refs"], codec=str(codec))
    paired = run_all(lm, layouts["refs"])
    assert np.array_equal(explicit[0].audio.samples, paired[0].audio.samples)
    lonely = tmp_path / lm.name
    lonely.symlink_to(lm)
    with pytest.raises(UsageError, match="codec GGUF is needed"):
        get_family("omnivoice").load(lonely)
    with pytest.raises(UsageError, match="not the model"):
        get_family("omnivoice").load(codec)
    with pytest.raises(UsageError, match="--codec only applies"):
        get_family("omnivoice").load(layouts["folder"], {"codec": str(codec)})


def step0_agreement(model, reference_model, text: str) -> float:
    """Share of step-0 greedy predictions (8 x T) that agree between two models."""
    from audiocpp.families.omnivoice.generate import MaskGitParams, build_batch
    from audiocpp.families.omnivoice.prompt_layout import build_prompt_layout, estimate_target_tokens

    cfg = reference_model.cfg
    prompt = build_prompt_layout(reference_model.tokenizer, text, estimate_target_tokens(text, None, None),
                          num_codebooks=cfg.num_audio_codebook, mask_id=cfg.audio_mask_id)
    batch = build_batch(prompt, cfg.audio_mask_id)
    preds = []
    for m in (model, reference_model):
        decoder = m.session("tts").decoder
        with torch.inference_mode():
            c, u = decoder.step_logits(decoder.pack(batch, guided=True))
            preds.append(decoder.predict(c, u, MaskGitParams(class_temperature=0.0), None)[0])
    return float((preds[0] == preds[1]).float().mean())


@pytest.mark.parametrize("name", ["package_q8_0", "package_bf16", "cpp_q8_0"])
def test_quantized_layouts_run_and_match_closely(name, layouts, ov_model):
    model = get_family("omnivoice").load(layouts[name])
    if name.endswith("q8_0"):
        assert model.codec.fc.weight.dtype == torch.float32  # the codec stays F32
    final = total = 0
    for task, req in requests(layouts["refs"]):
        ours = model.session(task).run(req)
        ref = ov_model.session(task).run(req)
        assert ours.audio.num_samples > 0 and np.isfinite(ours.audio.samples).all()
        final += sum(int((a == b).sum()) for a, b in zip(ours.details["tokens"], ref.details["tokens"]))
        total += sum(a.size for a in ref.details["tokens"])
    step0 = np.mean([step0_agreement(model, ov_model, t) for t in TEXTS])
    print(f"\n{name}: final tokens {final}/{total} = {final / total:.3f} equal to F32; step-0 greedy "
          f"predictions {step0:.4f} equal")
    # A tiny random model is chaotic over MaskGIT's steps; the first step's predictions show the
    # weight error itself.
    assert step0 >= 0.9


def test_reference_tone_is_quiet_and_voiced():
    tone = reference_tone()
    rms = float(np.sqrt(np.mean(tone ** 2)))
    assert 0 < rms < 0.1  # so the reference gain and the output rescale both apply
