"""Audio8 TTS 0.1B (Falcon-H1 slow AR, compact head) end to end against its reconstructed reference.

The oracle (tools/audio8_tts/reference_falcon.py ``goldens``, run on the upstream checkout at
14468db in .ref-envs/audio8) is upstream's ``ArkttsModel`` with its slow side replaced as the 0.1B
remote code does (``transformers.FalconH1Model`` + ``semantic_output``, index i -> semantic
``begin + i``, 4096 -> EOS): upstream's processor, fast AR, sampling with RAS, generate loop and
codec. The tiny 0.1B folder and the goldens are committed under tests/data/audio8_tts/falcon.

Checked: the folder is detected as the 0.1B from its config; prompts, greedy and seeded sampled
codes identical; audio of the same length with cosine >= 0.99999 (tts, clone, two references,
long text); a left-padded batch; streaming equals offline; our package and audio.cpp's layout
give the folder's audio; the SSM parameters stay float32 under a bfloat16 compute dtype; the CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.records import TaskRequest
from audiocpp.families.audio8_tts import plugin
from audiocpp.families.audio8_tts.generate import DualARGenerator, SamplingOptions, prefill_tensors
from audiocpp.families.audio8_tts.model.falcon_h1 import FalconH1SlowAR
from audiocpp.families.audio8_tts.prompt_layout import PromptLayoutBuilder
from tests.support import one_torch_thread, read_wav, run_cli

from .cases import cosine, generate_cases, request_for
from .conftest import GOLDENS

pytestmark = pytest.mark.parity

FALCON = GOLDENS / "falcon"
MANIFEST = json.loads((FALCON / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in generate_cases(MANIFEST)}
MIN_COSINE = 0.99999
_one_thread = pytest.fixture(autouse=True, scope="module")(one_torch_thread)


@pytest.fixture(scope="module")
def falcon():
    return plugin.load(FALCON / "tiny")


def golden(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(FALCON / "goldens" / f"{name}.npz"))


def run(model, name: str, *, mode: str = "offline", compute_dtype: str = "float32"):
    task, request = request_for(CASES[name], MANIFEST["defaults"], GOLDENS / "audio")
    pieces, result = [], None
    for event in model.session(task, mode, compute_dtype=compute_dtype).stream(request):
        if event.is_final:
            result = event.result
        else:
            pieces.append(event.audio.samples)
    return result, pieces


def test_goldens_name_the_oracle() -> None:
    assert MANIFEST["upstream"]["commit"].startswith("14468db")
    assert "FalconH1Model" in MANIFEST["oracle"] and MANIFEST["versions"]["transformers"].startswith("4.57.")
    cfg = json.loads((FALCON / "tiny" / "config.json").read_text())
    assert cfg["slow_backbone"] == "falcon_h1" and cfg["embedding_multiplier"] != 1.0
    prompts = [golden(c["name"])["prompt"].shape[-1] for c in MANIFEST["cases"] if c["kind"] == "generate"]
    assert min(prompts) > 2 * cfg["mamba_chunk_size"]  # every prompt spans several SSD chunks
    assert sum(p.stat().st_size for p in FALCON.rglob("*") if p.is_file()) < 4 * 1024 * 1024


def test_the_01b_is_told_from_its_config(falcon) -> None:
    from audiocpp.engine.registry import detect_family

    assert detect_family(FALCON / "tiny").name == "audio8_tts"
    net = falcon.model_for(torch.float32)
    assert isinstance(net.slow, FalconH1SlowAR) and net.slow.head == "compact"
    assert net.slow.semantic_output.out_features == falcon.config.codebook_size + 1


@pytest.mark.parametrize("name", list(CASES))
def test_generation_matches_reference(name: str, falcon) -> None:
    case, ref = CASES[name], golden(name)
    result, _ = run(falcon, name)
    details = result.details
    if case["kind"] == "generate":
        assert np.array_equal(details["prompts"][0], ref["prompt"])
        assert np.array_equal(details["codes"][0], ref["codes"]), "codes differ from the reference"
    else:
        assert details["chunks"] == case["chunks"]
        for i in range(len(case["chunks"])):
            assert np.array_equal(details["prompts"][i], ref[f"prompt_{i}"])
            assert np.array_equal(details["codes"][i], ref[f"codes_{i}"]), f"chunk {i}: codes differ"
    assert result.audio.samples.shape == ref["wav"].shape
    assert cosine(result.audio.samples, ref["wav"]) >= MIN_COSINE


@pytest.mark.parametrize("name", ["tts_sampled", "clone_greedy"])
def test_torch_default_kernels_match_reference_too(name: str) -> None:
    """Load option ``packed_linear=false`` (torch's GEMM instead of oneDNN-packed weights)."""
    model = plugin.load(FALCON / "tiny", {"packed_linear": False})
    assert not model.packed_linear
    result, _ = run(model, name)
    ref = golden(name)
    assert np.array_equal(result.details["codes"][0], ref["codes"])
    assert cosine(result.audio.samples, ref["wav"]) >= MIN_COSINE


def test_left_padded_batch_matches_reference(falcon) -> None:
    ref = golden("batch_sampled")
    case = {**MANIFEST["defaults"], **next(c for c in MANIFEST["cases"] if c["name"] == "batch_sampled")}
    builder = PromptLayoutBuilder(falcon.parts.tokenizer, falcon.config)
    prompt, mask = prefill_tensors([builder.build(t) for t in case["texts"]], falcon.config)
    assert np.array_equal(prompt.numpy(), ref["prompt"]) and np.array_equal(mask.numpy(), ref["mask"])
    assert int(mask.sum(-1).min()) < prompt.shape[-1]  # really padded
    opts = SamplingOptions(max_new_tokens=case["max_new_tokens"], temperature=case["temperature"],
                           top_p=case["top_p"], top_k=case["top_k"], do_sample=case["do_sample"])
    out = DualARGenerator(falcon.model_for(torch.float32)).generate(
        prompt, mask, opts, torch.Generator().manual_seed(case["seed"]))
    assert np.array_equal(out.codes.numpy(), ref["codes"])
    assert out.code_lengths.tolist() == ref["code_lengths"].tolist()
    assert out.finished.tolist() == ref["finished"].tolist()


@pytest.mark.parametrize("name", ["tts_sampled", "clone_sampled"])
def test_streaming_equals_offline(name: str, falcon) -> None:
    streamed, pieces = run(falcon, name, mode="streaming")
    offline, _ = run(falcon, name)
    assert np.array_equal(streamed.details["codes"][0], offline.details["codes"][0])
    assert len(pieces) > 1
    joined = np.concatenate(pieces)
    assert joined.shape == offline.audio.samples.shape == golden(name)["wav"].shape
    assert cosine(joined, offline.audio.samples) >= 0.99999


def synth(model, compute_dtype: str = "float32", **options) -> tuple[np.ndarray, np.ndarray]:
    request = TaskRequest(text="Hello world. This is a test.", seed=7,
                          options={"max_new_tokens": 24, **options})
    # float32: packages compared as stored
    result = model.session("tts", compute_dtype=compute_dtype).run(request)
    return result.details["codes"][0], result.audio.samples


@pytest.fixture(scope="module")
def falcon_packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Our F32 package and audio.cpp's layout (codec fused; F32 and BF16) of the tiny 0.1B."""
    from audiocpp.engine.packaging import plan_from_spec, write_package
    from tools.audio8_tts.convert_audiocpp import write_audiocpp_package

    root = tmp_path_factory.mktemp("falcon-packages")
    out = {"f32": root / "falcon-f32.gguf"}
    write_package(plan_from_spec(plugin.spec, {"": FALCON / "tiny"}), out["f32"], "f32")
    out["audiocpp"] = write_audiocpp_package(FALCON / "tiny", root / "falcon-audiocpp-f32.gguf", "f32")
    out["audiocpp_bf16"] = write_audiocpp_package(FALCON / "tiny", root / "falcon-audiocpp-bf16.gguf", "bf16")
    out["q8_0"] = root / "falcon-q8_0.gguf"
    write_package(plan_from_spec(plugin.spec, {"": FALCON / "tiny"}), out["q8_0"], "q8_0")
    return out


@pytest.mark.parametrize("layout", ["f32", "audiocpp"])
def test_packages_give_the_folders_audio(layout: str, falcon, falcon_packages) -> None:
    folder_codes, folder_audio = synth(falcon)
    model = plugin.load(falcon_packages[layout])
    assert isinstance(model.model_for(torch.float32).slow, FalconH1SlowAR)
    codes, audio = synth(model)
    assert np.array_equal(codes, folder_codes) and audio.shape == folder_audio.shape
    # our package folds the codec's weight-norm pairs as the folder load does (bit-identical);
    # audio.cpp's layout fuses them in numpy (another rounding order, amplified by random weights)
    if layout == "f32":
        assert np.array_equal(audio, folder_audio)
    else:
        assert cosine(audio, folder_audio) >= MIN_COSINE and np.abs(audio - folder_audio).max() <= 1e-3


def test_audiocpp_layout_stores_the_ssm_parameters_as_audiocpp_does(falcon, falcon_packages) -> None:
    """Names ``model_weights/slow.*``; the depthwise conv [C, 1, 4] (ggml [4, 1, C], the HF bytes);
    the conv and A_log / D / dt_bias F32 even in a BF16 package; the model loads them in float32."""
    from audiocpp.engine.weights import open_weights

    src = open_weights(falcon_packages["audiocpp_bf16"])
    conv_dim = falcon.model_for(torch.float32).slow.slow.layers[0].mamba.conv_dim
    conv = src.info("model_weights/slow.layers.0.mamba.conv1d.weight")
    assert tuple(conv.shape) == (conv_dim, 1, 4)
    for leaf in ("A_log", "D", "dt_bias", "conv1d.weight", "conv1d.bias"):
        assert src.info(f"model_weights/slow.layers.0.mamba.{leaf}").dtype == "F32"
    assert src.info("model_weights/semantic_output.weight").dtype == "BF16"
    model = plugin.load(falcon_packages["audiocpp_bf16"])
    codes, audio = synth(model)
    folder_codes, folder_audio = synth(falcon)
    # the folder's DualAR weights are bf16 already, so the codes are the folder's; the codec is
    # stored in bf16 here (fused from float32): its drift alone moves the audio
    assert np.array_equal(codes, folder_codes)
    assert audio.shape == folder_audio.shape and cosine(audio, folder_audio) >= 0.99


def prefill_logits(model, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The compact logits after the prompt of "Hello world. This is a test." (float32)."""
    net = model.model_for(dtype)
    prompt, mask = prefill_tensors([PromptLayoutBuilder(model.parts.tokenizer, model.config).build(
        "Hello world. This is a test.")], model.config)
    with torch.inference_mode():
        net.setup(1, prompt.shape[-1] + 1)
        hidden = net.slow.prefill(net.slow.embed(prompt), mask.cumsum(-1) - 1, mask)
        return net.slow.semantic_logits(hidden.logits_input)[0].float()


def test_q8_0_package_keeps_the_text_embedding_and_conv_unquantized(falcon, falcon_packages) -> None:
    """Drift of a Q8_0 package (docs/families/audio8_tts.md), on the prefill logits: free-running
    codes of a tiny random model diverge after a few frames from any perturbation."""
    from audiocpp.engine.weights import open_weights

    src = open_weights(falcon_packages["q8_0"])
    assert src.info("model_weights/slow.embed_tokens.weight").dtype in ("F16", "F32")  # a lookup table
    assert src.info("model_weights/slow.layers.0.mamba.conv1d.weight").dtype == "F32"
    assert src.info("model_weights/slow.layers.0.mamba.in_proj.weight").dtype == "Q8_0"
    ours, ref = prefill_logits(plugin.load(falcon_packages["q8_0"])), prefill_logits(falcon)
    assert 0 < float((ours - ref).abs().max()) < 0.2
    assert float(torch.nn.functional.cosine_similarity(ours, ref, dim=0)) >= 0.999
    assert int(ours.argmax()) == int(ref.argmax())


def test_bfloat16_compute_keeps_the_ssm_parameters_float32(falcon) -> None:
    net = falcon.model_for(torch.bfloat16)
    mixer = net.slow.slow.layers[0].mamba
    in_proj = mixer.in_proj  # a oneDNN-packed linear under the default load option packed_linear
    assert (in_proj.dtype if hasattr(in_proj, "dtype") else in_proj.weight.dtype) == torch.bfloat16
    for p in (mixer.A_log, mixer.D, mixer.dt_bias, mixer.conv1d.weight, mixer.conv1d.bias):
        assert p.dtype == torch.float32
    ours, ref = prefill_logits(falcon, torch.bfloat16), prefill_logits(falcon)
    assert 0 < float((ours - ref).abs().max()) < 0.2
    assert float(torch.nn.functional.cosine_similarity(ours, ref, dim=0)) >= 0.999
    result, _ = run(falcon, "tts_greedy", compute_dtype="bfloat16")
    assert result.details["codes"][0].shape[0] == 10 and np.isfinite(result.audio.samples).all()


def test_broken_01b_configs_and_weights_are_clear_errors(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    shutil.copytree(FALCON / "tiny", folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "mamba_n_heads": 7}))
    with pytest.raises(ModelError, match="mamba_n_heads"):
        plugin.load(folder)
    (folder / "config.json").write_text(json.dumps({**cfg, "mamba_d_state": 32}))
    with pytest.raises(ModelError, match=r"slow\.layers\.0\.mamba\.in_proj\.weight"):
        plugin.load(folder)


def test_cli_runs_the_01b(falcon, tmp_path: Path) -> None:
    out = tmp_path / "falcon.wav"
    # one thread, as this process: sampled codes of a random model can flip on thread-count noise
    proc = run_cli("--model", FALCON / "tiny", "--task", "tts", "--text", "Hello world. This is a test.",
                   "--seed", "7", "--request-option", "max_new_tokens=24",
                   "--session-option", "audio8_tts.threads=1", "--out", out)
    assert proc.returncode == 0, proc.stderr
    audio, rate = read_wav(out)
    _, ours = synth(falcon)
    assert rate == 44100 and audio.shape == ours.shape
    assert cosine(audio, ours) >= MIN_COSINE
