"""The VoxCPM1 switches of the shared VoxCPM modules against upstream ``VoxCPMModel`` (v1/1.5).

A tiny v1 checkpoint (tools/voxcpm2/checkpoint.py TINY_V1) runs through the voxcpm2 classes
configured by ``config.json`` (architecture ``voxcpm``): addition fusion, summed DiT
conditioning, muP, the residual LM with rope, AudioVAE v1 (v1 causal padding, no sample-rate
conditioning), v1 prompt trimming and the stateless 3-patch streaming window. Upstream v1's
offline latents include the prompt context patches; ours report the generated ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .cases import V1_CASES
from .test_parity import LATENT_TOL, MIN_COSINE, cosine, run_ours

pytestmark = pytest.mark.parity


def test_v1_config_selects_the_v1_switches(loaded) -> None:
    cfg = loaded("tiny_v1").config
    assert cfg.architecture == "voxcpm"
    assert (cfg.variant.residual_fusion, cfg.variant.dit_mu, cfg.variant.streaming) == ("add", "sum",
                                                                                        "window")
    assert cfg.lm.use_mup and not cfg.residual_lm_no_rope and cfg.audio_vae.version == 1
    assert loaded("tiny_v1").sample_rate == 16000
    assert not hasattr(loaded("tiny_v1").parts.build_model(torch.float32), "fusion_concat_proj")


@pytest.mark.parametrize("name", [c.name for c in V1_CASES])
def test_v1_generate_matches_upstream(name: str, reference, loaded, audio_files) -> None:
    case = next(c for c in V1_CASES if c.name == name)
    ref = reference[name]
    result, pieces = run_ours(loaded, case, audio_files)
    latents = result.details["latents"][0]
    expected = ref["patches"]
    if case.prompt and not case.streaming:
        expected = expected[len(expected) - len(latents):]  # drop v1's context patches
    assert latents.shape == expected.shape
    assert np.abs(latents - expected).max() <= LATENT_TOL
    assert result.details["attempts"][0] == int(ref["runs"])
    if case.streaming:
        assert [len(p) for p in pieces] == ref["chunk_lengths"].tolist()
    assert result.audio.samples.shape == ref["wav"].shape
    assert cosine(result.audio.samples, ref["wav"]) >= MIN_COSINE


def test_v1_vae_matches_upstream(reference, loaded, audio_files) -> None:
    import soundfile as sf

    vae = loaded("tiny_v1").parts.codec
    audio, _ = sf.read(audio_files["vae"], dtype="float32")
    ref = reference["v1_vae"]
    z = vae.encode(torch.from_numpy(audio).reshape(1, 1, -1))
    assert np.abs(z[0].numpy() - ref["latents"]).max() <= 1e-5
    y = vae.decode(torch.from_numpy(ref["latents"]).unsqueeze(0))[0, 0].numpy()
    assert y.shape == ref["audio"].shape and cosine(y, ref["audio"]) >= MIN_COSINE
