"""VoxCPM1 / 1.5 against upstream (PyPI voxcpm 2.0.3, ``voxcpm/model/voxcpm.py``) on tiny random
checkpoints of both variants, through the voxcpm1 plugin and its sessions.

One reference process runs every case (session fixture ``reference``); each case here runs ours
with the same arguments and seed and compares: the generated latent patches (max abs difference
<= 1e-5), the patch count (the stop step), the bad-case attempts, streaming chunk sizes, and the
final audio (same length, cosine >= 0.99999). Upstream draws its CFM noise from the global
generator after ``torch.manual_seed(seed)``; ours from ``request.generator()``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from .cases import CASE_BY_NAME, CASES, LATENT_TOL, MIN_COSINE, TOKENIZER_TEXTS, compare, cosine, run_ours

pytestmark = pytest.mark.parity


def test_checkpoints_round_trip_in_upstream(reference) -> None:
    """Every tensor we wrote (pytorch_model.bin / model.safetensors + audiovae.pth) reached
    upstream's model bit-exactly and upstream has no tensor the files lack."""
    counts = reference["_summary"]["round_trip"]
    assert counts["tiny_05b"] > 150 and counts["tiny_15"] > counts["tiny_05b"]


def test_variants_are_configured_as_upstream(loaded) -> None:
    small, large = loaded("tiny_05b").config, loaded("tiny_15").config
    for cfg in (small, large):
        assert cfg.architecture == "voxcpm" and cfg.lm.use_mup and cfg.audio_vae.version == 1
        assert (cfg.variant.residual_fusion, cfg.variant.dit_mu, cfg.variant.streaming) == ("add", "sum",
                                                                                            "window")
        assert cfg.variant.streaming_prefix_len == 3 and not cfg.variant.reference_prefix
    assert (small.patch_size, small.sample_rate, small.audio_vae.chunk_size) == (2, 16000, 10)
    assert (large.patch_size, large.sample_rate, large.audio_vae.chunk_size) == (4, 44100, 1764)
    assert large.audio_vae.decoder_rates == (7, 7, 6, 3, 2) and large.audio_vae.depthwise
    model = loaded("tiny_15").parts.build_model(torch.float32)
    assert not hasattr(model, "fusion_concat_proj") and model.feat_decoder.estimator.mu_tokens == 0


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_generate_matches_upstream(name: str, reference, loaded, audio_files) -> None:
    case = CASE_BY_NAME[name]
    ref = reference[name.replace(":", "__")]
    result, pieces = run_ours(loaded(case.checkpoint), case, audio_files)
    fig = compare(case, result, pieces, ref)
    assert fig["same_shape"], (f"patches: ours {fig['patches']}, upstream {fig['upstream_patches']} "
                               f"- {fig['context']}")
    assert fig["latent_diff"] <= LATENT_TOL
    assert fig["attempts"] == fig["upstream_attempts"]
    if case.prompt and not case.streaming:
        assert fig["context"] == (1 if case.prompt == "short44k" else 2)  # upstream's context patches
    if case.streaming:
        assert fig["chunk_lengths"] == fig["upstream_chunk_lengths"]
        assert np.array_equal(np.concatenate(pieces), result.audio.samples)
    assert fig["audio_len"] == fig["upstream_audio_len"]
    assert fig["cosine"] >= MIN_COSINE


def test_context_patches_count_in_the_bad_case_ratio(reference) -> None:
    """clone_retry is a bad case only because v1 counts the 2 prompt context patches."""
    for ck in ("tiny_05b", "tiny_15"):
        ref = reference[f"{ck}__clone_retry"]
        assert int(ref["runs"]) == 3 and len(ref["patches"]) == 16 + 2


@pytest.mark.parametrize("ck,wav", [("tiny_05b", "vae16k"), ("tiny_15", "vae44k")])
def test_vae_matches_upstream(ck: str, wav: str, reference, loaded, audio_files) -> None:
    import soundfile as sf

    vae = loaded(ck).parts.codec
    audio, rate = sf.read(audio_files[wav], dtype="float32")
    assert rate == vae.sample_rate
    ref = reference[f"{ck}__vae"]
    z = vae.encode(torch.from_numpy(audio).reshape(1, 1, -1))
    assert z.shape[1:] == ref["latents"].shape
    assert np.abs(z[0].numpy() - ref["latents"]).max() <= 1e-5
    y = vae.decode(torch.from_numpy(ref["latents"]).unsqueeze(0))[0, 0].numpy()
    assert y.shape == ref["audio"].shape and cosine(y, ref["audio"]) >= MIN_COSINE


def test_tokenizer_matches_upstream(reference, loaded) -> None:
    tokenizer = loaded("tiny_05b").parts.tokenizer
    for i, text in enumerate(TOKENIZER_TEXTS):
        assert tokenizer(text) == reference["tokenize"][f"ids_{i}"].tolist(), text


@pytest.mark.parametrize("name", ["tiny_05b:clone", "tiny_15:tts_long_min"])
def test_torch_default_kernels_match_upstream_too(name: str, reference, loaded, audio_files) -> None:
    """Load option ``packed_linear=false`` (torch's default GEMM instead of oneDNN-packed weights)."""
    case = CASE_BY_NAME[name]
    result, pieces = run_ours(loaded(case.checkpoint, packed_linear=False), case, audio_files)
    fig = compare(case, result, pieces, reference[name.replace(":", "__")])
    assert fig["same_shape"] and fig["latent_diff"] <= LATENT_TOL and fig["cosine"] >= MIN_COSINE


@pytest.mark.parametrize("name", ["tiny_15:stream_clone", "tiny_05b:stream_tts"])
def test_streaming_latents_equal_offline(name: str, loaded, audio_files) -> None:
    """Streaming decodes a stateless 3-patch window (so its audio differs from offline, as
    upstream's does); the latents are the offline ones."""
    case = CASE_BY_NAME[name]
    streamed, _ = run_ours(loaded(case.checkpoint), case, audio_files)
    offline, _ = run_ours(loaded(case.checkpoint), replace(case, streaming=False), audio_files)
    assert np.array_equal(streamed.details["latents"][0], offline.details["latents"][0])
