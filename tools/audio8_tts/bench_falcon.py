#!/usr/bin/env python3
"""Benchmark of the Audio8 TTS 0.1B DualAR at its real sizes: ours against the reference in one run.

    .venv/bin/python tools/audio8_tts/bench_falcon.py [--frames 64] [--prompt 64] [--threads 1]

Random weights at the 0.1B's dimensions (vocab 69633, dim 512, 24 Falcon-H1 layers with a Mamba2
mixer of 24 x 32 heads and d_state 64, 8/2 attention heads; the 4-layer fast AR of width 512, FFN
4864; 10 codebooks of 4096), bf16 on disk as the HF snapshot and float32 in memory on both sides.
The EOS row of the compact head is zero, so greedy decoding runs every requested frame on both
sides and the codes must be identical (checked).

- ours: ``DualARGenerator`` (static caches, recurrent Mamba2 step) in this process, with the
  linears oneDNN-packed as the default load option ``packed_linear`` does (``--unpacked``: not);
- reference: ``tools/audio8_tts/reference_falcon.py`` (upstream ``ArkttsModel.generate`` with
  ``transformers.FalconH1Model`` + compact head) in ``.ref-envs/audio8``, on the same folder.

Printed: prefill, per-frame and total wall time of each side and their ratio (ours / reference),
RTF (44.1 kHz, 2048 samples per frame), and our time to first audio in streaming: the prefill,
the first ``streaming_chunk_frames`` (4) frames and the incremental decode of those frames by the
codec at its real sizes (random weights). The reference has no streaming: its first audio comes
after the whole generation and one decode.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
FRAME_SECONDS = 2048 / 44100

#: The 0.1B config (HF ``Audio8/Audio8-TTS-Preview-0.1b``; docs/families/audio8_tts-0.1b.md).
REAL_01B = {
    "model_type": "arktts", "slow_backbone": "falcon_h1", "vocab_size": 69633, "dim": 512, "n_layer": 24,
    "n_head": 8, "n_local_heads": 2, "head_dim": 64, "intermediate_size": 768, "max_seq_len": 2048,
    "rope_base": 1e11, "norm_eps": 1e-5, "tie_word_embeddings": False, "codebook_size": 4096,
    "num_codebooks": 10, "semantic_begin_id": 65537, "semantic_end_id": 69632, "eos_token_id": 228,
    "pad_token_id": 0, "embedding_multiplier": 0.10888671875, "lm_head_multiplier": 0.078125,
    "expansion_factor": 1.5,
    "mamba_d_ssm": 768, "mamba_n_heads": 24, "mamba_d_head": 32, "mamba_d_state": 64, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_rms_norm": False,
    "n_fast_layer": 4, "fast_dim": 512, "fast_n_head": 8, "fast_n_local_heads": 2, "fast_head_dim": 64,
    "fast_intermediate_size": 4864, "norm_fastlayer_input": True, "ras_window_size": 10,
    "ras_temperature": 1.0, "ras_top_p": 0.9, "codec_sample_rate": 44100, "codec_frame_size": 2048,
}


def write_pipeline_folder(folder: Path, base: Path) -> Path:
    """A whole 0.1B-sized pipeline for the batch benchmark: the 0.1B DualAR's dims with random weights,
    and the 0.6B-sized folder ``base``'s token ids, tokenizer and codec (the 0.1B's own tokenizer
    layout is not at hand; the ids only index the embedding table, so a step computes what the 0.1B's
    does)."""
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    ids = json.loads((base / "config.json").read_text(encoding="utf-8"))
    config = {**REAL_01B, **{k: ids[k] for k in ("vocab_size", "semantic_begin_id", "semantic_end_id",
                                                   "eos_token_id", "pad_token_id")}}
    config.update({k: v for k, v in ids.items() if k.startswith("codec_")})
    write_folder(folder, config)
    for name in ("codec.pth", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "processor_config.json", "generation_config.json"):
        if (base / name).exists() and not (folder / name).exists():
            (folder / name).symlink_to(base / name)
    return folder


def write_folder(folder: Path, config: dict | None = None) -> None:
    """config.json and a random bf16 model.safetensors (checkpoint names) for the 0.1B DualAR."""
    from safetensors.torch import save_file

    from audiocpp.families.audio8_tts.config import Audio8Config
    from audiocpp.families.audio8_tts.model.dual_ar import DualAR

    config = config or REAL_01B
    model = DualAR(Audio8Config.from_dict(config))
    gen = torch.Generator().manual_seed(0)
    state = {}
    for name, p in model.state_dict().items():
        key = name.split(".", 1)[1]  # DualAR's slow./fast. prefix: the checkpoint's names are bare
        if key.endswith("A_log"):
            v = torch.log(torch.rand(p.shape, generator=gen) * 15 + 1)
        elif key.endswith("dt_bias"):
            v = torch.rand(p.shape, generator=gen) * 3 - 4
        elif p.dim() == 1:
            v = 1 + 0.1 * torch.randn(p.shape, generator=gen)
        else:
            v = torch.randn(p.shape, generator=gen) * (1.0 if "embed" in key else p[0].numel() ** -0.5)
        state[key] = v
    state["semantic_output.weight"][-1] = 0  # EOS never wins a greedy step: every frame runs
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in state.items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")


def prompt_rows(length: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    ids = np.zeros((1, 11, length), dtype=np.int64)
    ids[0, 0] = rng.integers(1, 60000, length)
    return ids


def run_ours(folder: Path, ids: np.ndarray, frames: int, packed: bool) -> dict:
    from audiocpp.engine.weights import Drop, Keep, SafetensorsSource, adapt, load_module_weights
    from audiocpp.families.audio8_tts.codec import ArkttsCodec, StreamingDecoder
    from audiocpp.families.audio8_tts.config import Audio8Config
    from audiocpp.families.audio8_tts.generate import DualARGenerator, SamplingOptions
    from audiocpp.families.audio8_tts.model.dual_ar import DualAR

    cfg = Audio8Config.from_file(folder / "config.json")
    model = DualAR(cfg)
    source = SafetensorsSource(folder / "model.safetensors")
    load_module_weights(model.slow, adapt(source, [Drop("fast_*")]), dtype=torch.float32, what="slow AR")
    load_module_weights(model.fast, adapt(source, [Keep("fast_*")]), dtype=torch.float32, what="fast AR")
    if packed:  # the default load option packed_linear: oneDNN-packed linears
        from audiocpp.engine.nn.linear.choice import fast_linears

        fast_linears(model, packed=True)
    model.eval()
    gen = DualARGenerator(model)
    prompt = torch.from_numpy(ids)
    mask = torch.ones(1, prompt.shape[-1], dtype=torch.long)
    opts = SamplingOptions(max_new_tokens=frames, do_sample=False)
    stamps, codes = [], []
    start = time.perf_counter()
    for frame, _ in gen.frames(prompt, mask, opts, None):
        stamps.append(time.perf_counter() - start)
        codes.append(frame[0])
    total = time.perf_counter() - start
    codec = ArkttsCodec(cfg.codec).eval()  # the real codec sizes, random weights
    chunk = torch.stack(codes[:4], dim=1)[None]
    t0 = time.perf_counter()
    StreamingDecoder(codec).push(chunk.clamp(max=1023))
    first_decode = time.perf_counter() - t0
    return {"codes": torch.stack(codes, dim=1).numpy(), "first_frame": stamps[0], "total": total,
            "per_frame": (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1),
            "ttfa": stamps[min(3, len(stamps) - 1)] + first_decode, "first_decode": first_decode}


def run_reference(folder: Path, ids: np.ndarray, frames: int, threads: int, work: Path) -> dict:
    spec = {"upstream": str(Path("/work/upstream/audio8")), "threads": threads, "checkpoints": {},
            "pipelines": {"real": str(folder)},
            "cases": [{"name": "bench", "kind": "generate", "checkpoint": "real", "ids": ids.tolist(),
                       "max_new_tokens": frames, "do_sample": False, "timed": True}]}
    (work / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    python = REPO / ".ref-envs" / "audio8" / "bin" / "python"
    proc = subprocess.run([str(python), str(REPO / "tools/audio8_tts/reference_falcon.py"),
                           str(work / "cases.json"), str(work / "out")], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"reference run failed:\n{proc.stderr[-3000:]}")
    out = dict(np.load(work / "out" / "bench.npz"))
    return {"codes": out["codes"][0], "total": float(out["seconds"]),
            "first_frame": float(out["first_frame"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=64, help="prompt length in positions")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--unpacked", action="store_true",
                        help="torch's GEMM (load option packed_linear=false)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "falcon-0.1b"
        folder.mkdir()
        write_folder(folder)
        ids = prompt_rows(args.prompt)
        ours = run_ours(folder, ids, args.frames, not args.unpacked)
        ref = run_reference(folder, ids, args.frames, args.threads, work)
    same = ours["codes"].shape == ref["codes"].shape and bool(np.array_equal(ours["codes"], ref["codes"]))
    audio = ours["codes"].shape[1] * FRAME_SECONDS
    kernels = "torch GEMM" if args.unpacked else "oneDNN-packed linears"
    print(f"Audio8 TTS 0.1B DualAR, real sizes, random weights, float32 ({kernels}), "
          f"{args.threads} thread(s): prompt {args.prompt}, {ours['codes'].shape[1]} frames "
          f"({audio:.2f} s of audio)")
    print(f"  codes identical to the reference: {same}")
    for name, r in (("ours", ours), ("reference", ref)):
        print(f"  {name:9s}: first frame {r['first_frame']:.3f} s, total {r['total']:.2f} s, "
              f"RTF {r['total'] / audio:.3f}")
    print(f"  ratio ours/reference (total): {ours['total'] / ref['total']:.3f}")
    print(f"  ours per frame {1000 * ours['per_frame']:.1f} ms; time to first audio in streaming "
          f"{ours['ttfa']:.3f} s (4 frames + codec decode {ours['first_decode']:.3f} s)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
