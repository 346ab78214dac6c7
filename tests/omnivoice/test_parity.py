"""Parity with upstream OmniVoice (PyPI omnivoice 0.2.1, default SDPA attention, fp32) on a
tiny random checkpoint built by upstream's classes: the step-0 batch and logits, the final
tokens of every chunk, the reference codes, and the final audio, for every case of
``cases.py`` (auto, design EN/ZH, duration, speed, clone with preprocessing on and off,
upstream's saved voice prompt, long-form auto and clone, greedy and seeded sampling)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audiocpp.engine.records import TaskRequest, VoiceReference
from audiocpp.families.omnivoice.generate import build_batch
from tests.omnivoice.cases import our_options

pytestmark = pytest.mark.parity

CASES = ["auto_greedy", "auto_sampled", "auto_classtemp", "auto_defaults", "design", "design_zh",
         "design_dur", "tts_speed", "clone", "clone_raw", "clone_sampled", "clone_prompt", "long_auto",
         "long_clone"]
LOGIT_TOL = 1e-4
AUDIO_COSINE = 0.99999


def task_of(case: dict) -> str:
    if case.get("ref_audio") or case.get("voice_prompt_in"):
        return "clone"
    return "design" if case.get("instruct") else "tts"


def run_ours(model, case: dict):
    request = TaskRequest(text=case["text"], options=our_options(case),
                          voice=VoiceReference(path=case["ref_audio"]) if case.get("ref_audio") else None,
                          voice_prompt=case.get("voice_prompt_in"))
    return model.session(task_of(case)).run(request)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-300))


@pytest.fixture(scope="module")
def results(ov_model, ov_reference):
    # clone_prompt reads the prompt file upstream writes during 'clone': keep the case order.
    return {case["name"]: run_ours(ov_model, case) for case in ov_reference.cases}


@pytest.mark.parametrize("name", CASES)
def test_step0_batch_and_logits(name, ov_model, ov_reference, results):
    ref = np.load(ov_reference.out / f"{name}.npz")
    prompt = results[name].details["prompts"][0]
    batch = build_batch(prompt, ov_model.cfg.audio_mask_id)
    assert np.array_equal(batch.input_ids.numpy(), ref["step0_input_ids"])
    assert np.array_equal(batch.audio_mask.numpy(), ref["step0_audio_mask"])
    assert np.array_equal(batch.attention_mask.numpy(), ref["step0_attention_mask"])
    with torch.inference_mode():
        logits = ov_model.lm(batch.input_ids, batch.audio_mask, batch.attention_mask).numpy()
    diff = float(np.abs(logits - ref["step0_logits"]).max())
    print(f"\n{name}: step-0 logits max |diff| {diff:.3g}")
    assert diff <= LOGIT_TOL
    # The decoder packs the rows (no padding) and sends only the two target windows through
    # the heads: the same numbers.
    decoder = ov_model.session("tts").decoder
    with torch.inference_mode():
        cond, uncond = decoder.step_logits(decoder.pack(batch, guided=True))
    s, t = batch.cond_len, batch.target_len
    assert np.array_equal(cond[0].numpy(), logits[0, :, s - t:s])
    assert np.array_equal(uncond[0].numpy(), logits[1, :, :t])


@pytest.mark.parametrize("name", CASES)
def test_tokens_codes_and_audio(name, ov_reference, results):
    ref = np.load(ov_reference.out / f"{name}.npz")
    result = results[name]
    assert result.details["target_lens"] == ref["target_lens"].tolist()
    chunks = sorted((k for k in ref.files if k.startswith("tokens_")), key=lambda k: int(k.split("_")[1]))
    ours = result.details["tokens"]
    assert len(ours) == len(chunks)
    mismatches = sum(int((o != ref[k]).sum()) for o, k in zip(ours, chunks))
    total = sum(ref[k].size for k in chunks)
    if "ref_codes" in ref.files:
        assert np.array_equal(result.details["ref_codes"], ref["ref_codes"][0])
    audio, expected = result.audio.samples, ref["audio"]
    cos = cosine(audio, expected) if audio.shape == expected.shape else float("nan")
    diff = float(np.abs(audio - expected).max()) if audio.shape == expected.shape else float("nan")
    print(f"\n{name}: tokens {total - mismatches}/{total} equal, {len(chunks)} chunk(s), "
          f"audio {audio.shape[0]} samples, cosine {cos:.9f}, max |diff| {diff:.3g}")
    assert mismatches == 0
    assert audio.shape == expected.shape
    assert cos >= AUDIO_COSINE


def test_every_case_is_checked(ov_reference):
    assert sorted(CASES) == sorted(c["name"] for c in ov_reference.cases)


@pytest.mark.parametrize("name", ["auto_sampled", "long_clone"])
def test_upstream_layout_where_packed_rows_would_differ(name, ov_model, ov_reference, monkeypatch):
    """Where torch's GEMM would give packed rows other bits (MKL held to AVX2 does for small
    shapes; engine.nn.linear.row_invariance), the decoder runs upstream's padded rows and heads over every
    position instead: still upstream's tokens, and such requests are not merged into one pass."""
    import audiocpp.families.omnivoice.generate as generate

    monkeypatch.setattr(generate, "all_same_rows", lambda shapes, rows, parts: not shapes)
    case = next(c for c in ov_reference.cases if c["name"] == name)
    session = ov_model.session(task_of(case))
    assert session.decoder.backbone_gemms and session.decoder.head_gemms  # the float32 torch GEMMs
    result = run_ours(ov_model, case)
    ref = np.load(ov_reference.out / f"{name}.npz")
    chunks = sorted((k for k in ref.files if k.startswith("tokens_")), key=lambda k: int(k.split("_")[1]))
    assert all(np.array_equal(o, ref[k]) for o, k in zip(result.details["tokens"], chunks))
    assert cosine(result.audio.samples, ref["audio"]) >= AUDIO_COSINE
    batch = build_batch(result.details["prompts"][0], ov_model.cfg.audio_mask_id)
    packed = session.decoder.pack(batch, guided=True)
    assert packed.padded and packed.heads_full and packed.input_ids.shape[2] == 2 * batch.cond_len
    assert not session.decoder.merges_exactly([packed, packed])
