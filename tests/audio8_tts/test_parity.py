"""Audio8 TTS 0.6B against upstream (Audio8-AI/Audio8_TTS@14468db, float32 CPU), via the committed
goldens of tools/audio8_tts/reference.py on the tiny checkpoint.

Checked: prompt ids (tokenizer and layout), the prefill logits, greedy and seeded sampled codes
with RAS (identical), cloning through upstream's audio loading/resampling/encoding, multiple
references, long text, left-padded batches, codec encode (identical codes) and decode, and the
final audio (same length, cosine >= 0.99999); streaming output equals offline output.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from audiocpp.families.audio8_tts.generate import DualARGenerator, SamplingOptions
from audiocpp.families.audio8_tts.prompt_layout import PromptLayoutBuilder, word_budget_chunks
from tests.support import one_torch_thread

from .cases import cosine, generate_cases, request_for
from .conftest import GOLDENS

pytestmark = pytest.mark.parity

MIN_COSINE = 0.99999
MANIFEST = json.loads((GOLDENS / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in generate_cases(MANIFEST)}
_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)


def run(tiny, manifest, audio_dir, name: str, *, mode: str = "offline", compute_dtype: str = "float32"):
    case = CASES[name]
    task, request = request_for(case, manifest["defaults"], audio_dir)
    session = tiny.session(task, mode, compute_dtype=compute_dtype)
    pieces, result = [], None
    for event in session.stream(request):
        if event.is_final:
            result = event.result
        else:
            pieces.append(event.audio.samples)
    return result, pieces


def test_goldens_name_the_upstream_commit_and_files(manifest) -> None:
    up = manifest["upstream"]
    assert up["commit"].startswith("14468db")
    assert up["files"]["model/audio8_tts_0_6B_preview/modeling_arktts.py"].startswith("10d2af30")
    assert set(up["files"]) == {f"model/audio8_tts_0_6B_preview/{f}" for f in (
        "modeling_arktts.py", "modeling_arktts_codec.py", "processing_arktts.py", "configuration_arktts.py")}
    ours = [GOLDENS / "manifest.json"] + [p for sub in ("tiny", "audio", "goldens")
                                          for p in (GOLDENS / sub).rglob("*")]
    assert sum(p.stat().st_size for p in ours if p.is_file()) < 4 * 1024 * 1024
    digest = hashlib.sha256((GOLDENS / "tiny" / "codec.pth").read_bytes()).hexdigest()
    assert len(digest) == 64


def test_prompt_ids_equal_upstream_processor(tiny, manifest, golden) -> None:
    case = next(c for c in manifest["cases"] if c["kind"] == "tokenize")
    ref = golden("tokenize")
    builder = PromptLayoutBuilder(tiny.parts.tokenizer, tiny.config)
    for i, text in enumerate(case["texts"]):
        assert builder.build(text)[0].tolist() == ref[f"tts_{i}"].tolist(), text
    codes = torch.zeros((10, 2), dtype=torch.long)
    from audiocpp.families.audio8_tts.prompt_layout import Reference

    for i, ref_text in enumerate(case["reference_texts"]):
        row0 = builder.build(case["texts"][0], [Reference(ref_text, codes)])[0].tolist()
        prefix, suffix = ref[f"prefix_{i}"].tolist(), ref[f"suffix_{i}"].tolist()
        assert row0 == prefix + [tiny.config.semantic_begin_id] * 2 + suffix, ref_text


def test_prefill_logits_match_upstream_forward(tiny, golden) -> None:
    ref = golden("forward")
    net = tiny.model_for(torch.float32)
    prompt = torch.from_numpy(ref["prompt"])[None]
    mask = torch.ones(1, prompt.shape[-1], dtype=torch.long)
    with torch.inference_mode():
        net.setup(1, prompt.shape[-1] + 1)
        hidden = net.slow.prefill(net.slow.embed(prompt), mask.cumsum(-1) - 1, mask)
        full = net.slow.semantic_logits(hidden.logits_input)[0]
        compact = net.slow.semantic_logits(hidden.logits_input, compact=True)[0]
    # upstream's forward scores every position at once (another GEMM shape): equal up to rounding
    assert torch.allclose(full, torch.from_numpy(ref["logits"]), atol=1e-5, rtol=1e-5)
    cfg = tiny.config
    rows = torch.cat((full[cfg.semantic_begin_id:cfg.semantic_end_id + 1],
                      full[cfg.eos_token_id:cfg.eos_token_id + 1]))
    assert torch.allclose(compact, rows, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_generation_matches_upstream(name: str, tiny, manifest, golden, audio_dir) -> None:
    case, ref = CASES[name], golden(name)
    result, _ = run(tiny, manifest, audio_dir, name)
    details = result.details
    if case["kind"] == "generate":
        assert len(details["prompts"]) == 1
        assert np.array_equal(details["prompts"][0], ref["prompt"])
        assert np.array_equal(details["codes"][0], ref["codes"]), "codes differ from upstream"
    else:
        assert details["chunks"] == case["chunks"] == word_budget_chunks(case["text"],
                                                                         case["text_chunk_size"])
        for i in range(len(case["chunks"])):
            assert np.array_equal(details["prompts"][i], ref[f"prompt_{i}"])
            assert np.array_equal(details["codes"][i], ref[f"codes_{i}"]), (
                f"chunk {i}: codes differ from upstream")
    assert result.audio.samples.shape == ref["wav"].shape
    assert cosine(result.audio.samples, ref["wav"]) >= MIN_COSINE


@pytest.mark.parametrize("name", ["tts_sampled", "clone_sampled", "long_form"])
def test_torch_default_kernels_match_upstream_too(name: str, tiny_unpacked, manifest, golden,
                                                  audio_dir) -> None:
    """Load option ``packed_linear=false`` (torch's GEMM instead of oneDNN-packed weights)."""
    assert not tiny_unpacked.packed_linear
    ref = golden(name)
    result, _ = run(tiny_unpacked, manifest, audio_dir, name)
    codes = result.details["codes"]
    expected = [ref["codes"]] if "codes" in ref else [ref[f"codes_{i}"] for i in range(len(codes))]
    assert all(np.array_equal(a, b) for a, b in zip(codes, expected, strict=True))
    assert cosine(result.audio.samples, ref["wav"]) >= MIN_COSINE


@pytest.mark.parametrize("name", ["tts_sampled", "clone_sampled", "tts_greedy"])
def test_full_vocabulary_scoring_gives_the_same_codes(name: str, tiny, manifest, golden, audio_dir) -> None:
    """The compact semantic head is an exact shortcut of upstream's full-vocabulary sampling."""
    ref = golden(name)
    case = {**MANIFEST["defaults"], **CASES[name]}
    gen = DualARGenerator(tiny.model_for(torch.float32), full_vocab=True)
    prompt = torch.from_numpy(ref["prompt"])[None]
    opts = SamplingOptions(max_new_tokens=case["max_new_tokens"], temperature=case["temperature"],
                           top_p=case["top_p"], top_k=case["top_k"], do_sample=case["do_sample"])
    rng = torch.Generator().manual_seed(case["seed"])
    out = gen.generate(prompt, torch.ones(1, prompt.shape[-1], dtype=torch.long), opts, rng)
    assert np.array_equal(out.codes[0].numpy(), ref["codes"])


@pytest.mark.parametrize("name", ["batch_greedy", "batch_sampled"])
def test_left_padded_batch_matches_upstream(name: str, tiny, manifest, golden) -> None:
    ref = golden(name)
    case = {**manifest["defaults"], **next(c for c in manifest["cases"] if c["name"] == name)}
    builder = PromptLayoutBuilder(tiny.parts.tokenizer, tiny.config)
    from audiocpp.families.audio8_tts.generate import prefill_tensors

    prompt, mask = prefill_tensors([builder.build(t) for t in case["texts"]], tiny.config)
    assert np.array_equal(prompt.numpy(), ref["prompt"]) and np.array_equal(mask.numpy(), ref["mask"])
    opts = SamplingOptions(max_new_tokens=case["max_new_tokens"], temperature=case["temperature"],
                           top_p=case["top_p"], top_k=case["top_k"], do_sample=case["do_sample"])
    rng = torch.Generator().manual_seed(case["seed"])
    out = DualARGenerator(tiny.model_for(torch.float32)).generate(prompt, mask, opts, rng)
    assert np.array_equal(out.codes.numpy(), ref["codes"])
    assert out.code_lengths.tolist() == ref["code_lengths"].tolist()
    assert out.finished.tolist() == ref["finished"].tolist()


def test_codec_encode_and_decode_match_upstream(tiny, golden, audio_dir) -> None:
    from audiocpp.engine.audio.io import read_audio
    from audiocpp.engine.audio.resample import resample

    ref = golden("codec")
    audio = read_audio(audio_dir / "codec_in.wav")
    samples = resample(audio.samples, audio.sample_rate, tiny.sample_rate)
    codec = tiny.parts.codec
    codes = codec.encode(torch.from_numpy(samples)[None, None])[0]
    assert np.array_equal(codes.numpy(), ref["codes"])
    decoded = codec.decode(torch.from_numpy(ref["codes"])[None])[0, 0].numpy()
    assert decoded.shape == ref["decoded"].shape and cosine(decoded, ref["decoded"]) >= MIN_COSINE
    # codes past the residual codebooks (the fast AR emits up to codebook_size - 1) are clamped
    wild = torch.from_numpy(ref["wild_codes"])
    assert int(wild[1:].max()) >= tiny.config.codec.residual_codebook_size
    decoded = codec.decode(wild[None])[0, 0].numpy()
    assert decoded.shape == ref["wild_decoded"].shape and cosine(decoded, ref["wild_decoded"]) >= MIN_COSINE


@pytest.mark.parametrize("name", ["tts_sampled", "clone_sampled", "long_form"])
def test_streaming_equals_offline(name: str, tiny, manifest, audio_dir, golden) -> None:
    streamed, pieces = run(tiny, manifest, audio_dir, name, mode="streaming")
    offline, _ = run(tiny, manifest, audio_dir, name)
    for a, b in zip(streamed.details["codes"], offline.details["codes"], strict=True):
        assert np.array_equal(a, b)
    assert len(pieces) > 2
    joined = np.concatenate(pieces)
    assert joined.shape == offline.audio.samples.shape == golden(name)["wav"].shape
    assert np.abs(joined - offline.audio.samples).max() <= 1e-3
    assert cosine(joined, offline.audio.samples) >= 0.99999
