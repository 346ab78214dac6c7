"""The 0.1B slow AR (Falcon-H1 backbone + compact head) against ``transformers.FalconH1Model``.

Live comparison: one process of ``tools/audio8_tts/reference_falcon.py`` in ``.ref-envs/audio8``
(transformers 4.57.6) runs every case on tiny random checkpoints written here. Checked within
1e-5: prefill logits and last hidden states at several lengths (below, at and past the SSD chunk
size), prefill then token-by-token recurrent decode against the reference's cached decode and
against our own prefill, and the Mamba2 mixer alone (outputs and final conv/SSM states).
Config ``unity`` has the real checkpoint's multipliers (only ``embedding_multiplier`` is not 1);
``mup`` sets every muP multiplier away from 1, two SSM groups and the gated RMSNorm. Left-padded
batches (prefill, then steps with padding bits) are compared too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from audiocpp.families.audio8_tts.config import Audio8Config
from audiocpp.families.audio8_tts.model.falcon_h1 import FalconH1SlowAR
from tests.support import REPO, one_torch_thread, run_reference

pytestmark = pytest.mark.parity

TOL = 1e-5
SCRIPT = REPO / "tools" / "audio8_tts" / "reference_falcon.py"

BASE: dict[str, Any] = {
    "model_type": "arktts", "slow_backbone": "falcon_h1", "vocab_size": 300, "dim": 64, "n_layer": 2,
    "n_head": 4, "n_local_heads": 2, "head_dim": 16, "intermediate_size": 96, "max_seq_len": 128,
    "rope_base": 1e11, "norm_eps": 1e-5, "codebook_size": 32, "num_codebooks": 10,
    "semantic_begin_id": 200, "semantic_end_id": 231, "eos_token_id": 5, "pad_token_id": 0,
    "embedding_multiplier": 0.10888671875, "lm_head_multiplier": 0.078125,
    "mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_d_head": 8, "mamba_d_state": 16, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_chunk_size": 16, "mamba_conv_bias": True, "mamba_rms_norm": False,
    "codec_semantic_codebook_size": 32,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "unity": BASE,
    "mup": {**BASE, "mamba_n_groups": 2, "mamba_chunk_size": 8, "mamba_rms_norm": True,
            "mamba_norm_before_gate": False, "attention_in_multiplier": 0.75,
            "attention_out_multiplier": 1.25, "key_multiplier": 0.5, "ssm_in_multiplier": 1.5,
            "ssm_out_multiplier": 0.8,
            "ssm_multipliers": [0.9, 1.1, 0.7, 1.3, 0.6], "mlp_multipliers": [1.2, 0.85]},
}
# transformers' gated Mamba2 norm squeezes a one-token output to (B, dim), which broadcasts
# wrongly against attention's (B, 1, dim) when B > 1: batches use the muP config without it.
CONFIGS["mup_nonorm"] = {**CONFIGS["mup"], "mamba_rms_norm": False}
# (name, checkpoint, total length, prefill length): decode covers the rest.
SLOW_CASES = [
    ("unity_len1", "unity", 1, 1),
    ("unity_len7", "unity", 7, 3),
    ("unity_len16", "unity", 16, 16),
    ("unity_len45", "unity", 45, 20),
    ("unity_len70", "unity", 70, 37),
    ("mup_len9", "mup", 9, 2),
    ("mup_len33", "mup", 33, 17),
]
MIXER_CASES = [("unity_mixer", "unity", 37, 21), ("mup_mixer", "mup", 29, 12)]
# (name, checkpoint, real prompt lengths of the rows, decode steps): left-padded batches; the
# last row finishes after two steps (its later columns carry padding bit 0, as upstream).
BATCH_CASES = [("unity_batch", "unity", (20, 9), 6), ("mup_batch", "mup_nonorm", (5, 12, 8), 5)]


def random_state(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Weights with O(1) activations: fan-in scaled linears, unit embeddings, norms near 1,
    Mamba2 A/dt/D in their usual ranges."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, p in model.state_dict().items():
        if name.endswith("A_log"):
            v = torch.log(torch.rand(p.shape, generator=g) * 15 + 1)
        elif name.endswith("dt_bias"):
            v = torch.rand(p.shape, generator=g) * 3 - 4
        elif name.endswith((".D", "norm.weight", "layernorm.weight")):
            v = 1 + 0.1 * torch.randn(p.shape, generator=g)
        elif "embed" in name:
            v = torch.randn(p.shape, generator=g)
        elif p.dim() == 1:
            v = 0.1 * torch.randn(p.shape, generator=g)
        else:
            v = (torch.rand(p.shape, generator=g) * 2 - 1) / p[0].numel() ** 0.5
        state[name] = v.contiguous()
    return state


def build(cfg: dict[str, Any], seed: int) -> FalconH1SlowAR:
    model = FalconH1SlowAR(Audio8Config.from_dict(cfg))
    model.load_state_dict(random_state(model, seed))
    return model.eval()


def random_ids(cfg: dict[str, Any], length: int, seed: int) -> np.ndarray:
    """[11, T]: text ids, then semantic frames with their codes (codes 0 elsewhere)."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((cfg["num_codebooks"] + 1, length), dtype=np.int64)
    n_text = max(1, length // 3)
    ids[0, :n_text] = rng.integers(1, cfg["semantic_begin_id"], n_text)
    n_sem = length - n_text
    ids[0, n_text:] = rng.integers(cfg["semantic_begin_id"], cfg["semantic_end_id"] + 1, n_sem)
    ids[1:, n_text:] = rng.integers(0, cfg["codebook_size"], (cfg["num_codebooks"], n_sem))
    ids[1, n_text:] = ids[0, n_text:] - cfg["semantic_begin_id"]
    return ids


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    yield from one_torch_thread()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[FalconH1SlowAR, Path, int]]:
    root = tmp_path_factory.mktemp("falcon-h1")
    out = {}
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        model = build(cfg, 100 + i)
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        state = model.state_dict()
        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
        out[name] = (model, folder, len(state))
    return out


def batch_inputs(cfg: dict[str, Any], lengths: tuple[int, ...], steps: int, seed: int) -> dict[str, Any]:
    """Left-padded prompt rows (row 0 = pad id, codes 0 in the padding) and the step columns."""
    width = max(lengths)
    ids = np.zeros((len(lengths), cfg["num_codebooks"] + 1, width), dtype=np.int64)
    ids[:, 0] = cfg["pad_token_id"]
    mask = np.zeros((len(lengths), width), dtype=np.int64)
    for b, n in enumerate(lengths):
        ids[b, :, width - n :] = random_ids(cfg, n, seed + b)
        mask[b, width - n :] = 1
    columns = np.stack([random_ids(cfg, 3 * len(lengths), seed + 10 + s)[:, -len(lengths):].T
                        for s in range(steps)])
    valid = np.ones((steps, len(lengths)), dtype=np.int64)
    valid[3:, -1] = 0
    return {"ids": ids, "mask": mask, "columns": columns, "valid": valid}


@pytest.fixture(scope="module")
def inputs() -> dict[str, Any]:
    data: dict[str, Any] = {name: random_ids(CONFIGS[ckpt], total, seed)
                            for seed, (name, ckpt, total, _) in enumerate(SLOW_CASES)}
    for seed, (name, ckpt, total, _) in enumerate(MIXER_CASES):
        data[name] = np.random.default_rng(50 + seed).standard_normal(
            (1, total, CONFIGS[ckpt]["dim"])).astype(np.float32)
    for seed, (name, ckpt, lengths, steps) in enumerate(BATCH_CASES):
        data[name] = batch_inputs(CONFIGS[ckpt], lengths, steps, 70 + 20 * seed)
    return data


@pytest.fixture(scope="module")
def reference(models, inputs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("falcon-h1-ref")
    cases = [{"name": n, "checkpoint": c, "kind": "slow", "ids": inputs[n].tolist(), "prefill": p}
             for n, c, _, p in SLOW_CASES]
    cases += [{"name": n, "checkpoint": c, "kind": "mixer", "x": inputs[n].tolist(), "prefill": p}
              for n, c, _, p in MIXER_CASES]
    cases += [{"name": n, "checkpoint": c, "kind": "batch", **{k: v.tolist() for k, v in inputs[n].items()}}
              for n, c, *_ in BATCH_CASES]
    spec = {"checkpoints": {name: str(folder) for name, (_, folder, _) in models.items()}, "cases": cases}
    (root / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    summary = run_reference("audio8", SCRIPT, root / "cases.json", root / "out")
    names = [c[0] for c in SLOW_CASES + MIXER_CASES + BATCH_CASES]
    results: dict[str, Any] = {n: dict(np.load(root / "out" / f"{n}.npz")) for n in names}
    results["_summary"] = summary
    return results


def max_diff(a: torch.Tensor | np.ndarray, b: np.ndarray) -> float:
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    assert a.shape == b.shape
    return float(np.abs(a - b).max())


def run_ours(model: FalconH1SlowAR, ids: np.ndarray, prefill: int) -> dict[str, torch.Tensor]:
    """Full prefill (every position); then, through the SlowAR interface, prefill of ``prefill``
    positions and one recurrent step per remaining one."""
    x = torch.from_numpy(ids)[None]
    total = x.shape[-1]
    with torch.inference_mode():
        full_hidden = model.slow.prefill(model.embed(x))
        full_logits = model.semantic_output(full_hidden)
        model.setup(1, total)
        cache = model.cache
        assert cache is not None
        # The backbone's prefill gives every prompt position; SlowAR.prefill the last one.
        hidden = model.slow.prefill(model.embed(x[..., :prefill]), cache)
        last = model.prefill(model.embed(x[..., :prefill]), torch.arange(prefill)[None],
                             torch.ones(1, prefill, dtype=torch.long))
        assert torch.equal(last.logits_input, hidden[:, -1:]) and last.fast_input is last.logits_input
        step_logits, step_hidden = [model.semantic_output(hidden)], [hidden]
        for pos in range(prefill, total):
            out = model.step(model.embed(x[..., pos : pos + 1]), torch.tensor([[pos]]),
                             torch.ones(1, 1, dtype=torch.long))
            step_logits.append(model.semantic_logits(out.logits_input)[:, None])
            step_hidden.append(out.logits_input)
        assert cache.length == total
        model.release()
    return {"full_logits": full_logits[0], "full_hidden": full_hidden[0],
            "step_logits": torch.cat(step_logits, dim=1)[0], "step_hidden": torch.cat(step_hidden, dim=1)[0]}


def test_checkpoints_load_strictly_in_reference(models, reference) -> None:
    """Every tensor we wrote is one of the reference model's, and it has no other."""
    loaded = reference["_summary"]["loaded"]
    assert loaded == {name: count for name, (_, _, count) in models.items()}
    assert reference["_summary"]["transformers"].startswith("4.57.")


@pytest.mark.parametrize("name,ckpt,total,prefill", SLOW_CASES)
def test_prefill_matches_falcon_h1(name: str, ckpt: str, total: int, prefill: int, models, inputs,
                                   reference) -> None:
    ours = run_ours(models[ckpt][0], inputs[name], prefill)
    ref = reference[name]
    assert max_diff(ours["full_logits"], ref["full_logits"]) <= TOL
    assert max_diff(ours["full_hidden"], ref["full_hidden"]) <= TOL
    # The test would be vacuous on a degenerate model: logits must be spread out.
    assert float(np.std(ref["full_logits"])) > 0.1


@pytest.mark.parametrize("name,ckpt,total,prefill", [c for c in SLOW_CASES if c[2] > c[3]])
def test_recurrent_decode_matches_reference_and_prefill(name: str, ckpt: str, total: int, prefill: int,
                                                         models, inputs, reference) -> None:
    ours = run_ours(models[ckpt][0], inputs[name], prefill)
    ref = reference[name]
    assert max_diff(ours["step_logits"], ref["step_logits"]) <= TOL
    assert max_diff(ours["step_hidden"], ref["step_hidden"]) <= TOL
    assert max_diff(ours["step_logits"], ours["full_logits"].numpy()) <= TOL


@pytest.mark.parametrize("name,ckpt,total,prefill", MIXER_CASES)
def test_mamba2_mixer_alone_matches_transformers(name: str, ckpt: str, total: int, prefill: int,
                                                 models, inputs, reference) -> None:
    from audiocpp.engine.nn.layers.mamba2 import Mamba2Cache

    mixer = models[ckpt][0].slow.layers[0].mamba
    cfg = models[ckpt][0].falcon
    x = torch.from_numpy(inputs[name]) * cfg.ssm_in_multiplier  # transformers' mixer applies it itself
    ref = reference[name]
    cache = Mamba2Cache(1, 1, mixer.conv_dim, mixer.d_conv, mixer.n_heads, mixer.head_dim, mixer.d_state)
    with torch.inference_mode():
        full = mixer(x)
        outs = [mixer(x[:, :prefill], cache, 0)]
        outs += [mixer.step(x[:, p : p + 1], cache, 0) for p in range(prefill, total)]
    assert max_diff(full[0], ref["full"]) <= TOL
    assert max_diff(torch.cat(outs, dim=1)[0], ref["steps"]) <= TOL
    assert max_diff(cache.ssm[0, 0], ref["ssm_state"]) <= TOL
    assert max_diff(cache.conv[0, 0], ref["conv_state"]) == 0.0


@pytest.mark.parametrize("name,ckpt,lengths,steps", BATCH_CASES)
def test_left_padded_batch_matches_reference(name: str, ckpt: str, lengths: tuple[int, ...], steps: int,
                                             models, inputs, reference) -> None:
    """Prefill with the padding mask and ``cumsum(mask) - 1`` positions, then steps with each
    column's padding bit, as upstream's ``generate`` drives the slow AR."""
    model = models[ckpt][0]
    case = inputs[name]
    ids, mask = torch.from_numpy(case["ids"]), torch.from_numpy(case["mask"])
    width = ids.shape[-1]
    logits, hidden = [], []
    with torch.inference_mode():
        model.setup(len(lengths), width + steps)
        out = model.prefill(model.embed(ids), mask.cumsum(-1).sub(1).clamp_min(0), mask)
        logits.append(model.semantic_logits(out.logits_input))
        hidden.append(out.fast_input[:, 0])
        prompt_lengths = mask.sum(-1)
        for step in range(steps):
            column = torch.from_numpy(case["columns"][step])[..., None]
            valid = torch.from_numpy(case["valid"][step])[:, None]
            out = model.step(model.embed(column), (prompt_lengths + step)[:, None], valid)
            logits.append(model.semantic_logits(out.logits_input))
            hidden.append(out.fast_input[:, 0])
        model.release()
    ref = reference[name]
    assert max_diff(torch.stack(logits, 1), ref["logits"]) <= TOL
    assert max_diff(torch.stack(hidden, 1), ref["hidden"]) <= TOL
