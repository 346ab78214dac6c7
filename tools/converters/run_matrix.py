#!/usr/bin/env python3
"""Run the C++ ports' own converters on tiny checkpoints and load every file they write.

A maintainer tool (issue #18): the converters are other projects' code and are never part of
this repository, so it takes the paths of a checkout (and of binaries built there by that
project's own build) and runs them unmodified:

- omnivoice.cpp: ``convert.py`` (copied into a scratch folder that holds
  ``checkpoints/OmniVoice``, as the script expects) and ``quantize`` (BF16, Q8_0, Q4_K_M);
- VoxCPM.cpp: ``scripts/convert_voxcpm_to_gguf.py`` and ``voxcpm_quantize`` (``--type`` x
  ``--audio-vae-mode``);
- audio.cpp: ``audiocpp_gguf`` for the families its checkout ships a spec for.

Tiny checkpoints come from the repository's own tools (tools/omnivoice/checkpoint.py,
tools/voxcpm1/checkpoint.py, tools/voxcpm/checkpoint.py). Each output is loaded with audiocpp
(family detected) and compared with the folder it came from (``compare.py``); the matrix is
printed as a Markdown table and written as JSON.

    python tools/converters/run_matrix.py --work /tmp/matrix \\
        [--omnivoice-cpp CHECKOUT [--omnivoice-quantize BIN] --omnivoice-python PY] \\
        [--voxcpm-cpp CHECKOUT [--voxcpm-quantize BIN] --voxcpm-python PY] \\
        [--audio-cpp CHECKOUT --audiocpp-gguf BIN] [--only omnivoice_cpp,voxcpm_cpp,audio_cpp]

``--omnivoice-python`` needs numpy and gguf; ``--voxcpm-python`` needs torch, safetensors,
transformers, gguf and the ``voxcpm`` package (the converter imports its AudioVAEConfig).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.converters.compare import Comparer  # noqa: E402

OMNIVOICE_QUANTS = ("BF16", "Q8_0", "Q4_K_M")
# voxcpm_quantize --type x --audio-vae-mode: on the tiny widths (rows of 64) every K type falls back
# to the same storage, so one stands for all; the 256-wide checkpoint takes each K type.
VOXCPM_NARROW = (("F16", "mixed"), ("Q8_0", "mixed"), ("Q8_0", "f16"), ("Q4_K", "mixed"), ("Q4_K", "f16"),
                 ("IQ4_NL", "mixed"))
VOXCPM_WIDE = (("Q8_0", "mixed"), ("Q4_K", "mixed"), ("Q4_K", "f16"), ("Q5_K", "mixed"), ("Q3_K", "mixed"),
               ("Q2_K", "mixed"), ("IQ4_XS", "mixed"))


@dataclass
class Row:
    converter: str
    commit: str
    family: str
    checkpoint: str
    output: str
    types: str = ""
    result: str = ""
    drift: str = ""
    ok: bool = False
    claimed: bool = True  # a layout audiocpp says it loads (the exit status counts only these)


def run(cmd: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"{Path(str(cmd[0])).name} {' '.join(map(str, cmd[1:3]))} "
                           f"exited {proc.returncode}:\n"
                           + "\n".join(tail))
    return proc.stdout + proc.stderr


def commit_of(checkout: Path) -> str:
    try:
        return run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"]).strip()
    except (RuntimeError, OSError):
        stamp = checkout / "COMMIT"
        return stamp.read_text().strip() if stamp.is_file() else "unknown"


def gguf_types(path: Path) -> str:
    """``TYPE:count`` of a GGUF's tensors."""
    from collections import Counter

    from audiocpp.engine.weights.gguf_file import GGUFFile, ggml_type_name

    counts = Counter(ggml_type_name(t.ggml_type) for t in GGUFFile(path).tensors.values())
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


# -- checkpoints ------------------------------------------------------------------------------
def build_checkpoints(work: Path, omnivoice_ref_python: Path) -> dict[str, Path]:
    """Tiny checkpoints of every layout the matrix converts."""
    import torch

    from tools.voxcpm1 import checkpoint as v1
    from tools.voxcpm2 import checkpoint as v2

    root = work / "ckpt"
    out: dict[str, Path] = {}
    ov = root / "omnivoice"
    if not (ov / "config.json").is_file():
        run([omnivoice_ref_python, REPO / "tools" / "omnivoice" / "checkpoint.py", ov, "--size", "tiny"])
    out["omnivoice"] = ov
    wide = copy.deepcopy(v1.TINY_05B)  # rows of 256: K-quants apply (the tiny widths fall back)
    wide["lm_config"].update(hidden_size=256, intermediate_size=512, num_attention_heads=16)  # head_dim 16
    for key in ("encoder_config", "dit_config"):
        wide[key].update(hidden_dim=256, ffn_dim=512, num_heads=16)
    specs = {
        "voxcpm1_05b_f32": (v1.TINY_05B, "bin", torch.float32, 99),
        "voxcpm1_05b_w256_f32": (wide, "bin", torch.float32, 98),
        "voxcpm1_05b_bf16": (v1.TINY_05B, "bin", torch.bfloat16, 99),
        "voxcpm1_15_f32": (v1.TINY_15, "safetensors", torch.float32, 74),
        "voxcpm1_15_bf16": (v1.TINY_15, "safetensors", torch.bfloat16, 74),
    }
    for name, (cfg, weights, dtype, seed) in specs.items():
        path = root / name
        if not (path / "config.json").is_file():
            v1.write_v1_checkpoint(path, cfg, seed=seed, weights=weights, dtype=dtype, stop_tie=0.01)
        out[name] = path
    for name in ("voxcpm1_05b_f32", "voxcpm1_15_f32", "voxcpm1_05b_w256_f32"):
        out[f"{name}_strmerges"] = string_merges_copy(out[name], root / f"{name}_strmerges")
    a8 = root / "audio8_tts"
    if not (a8 / "config.json").is_file():  # the committed tiny 0.6B-style folder (codec.safetensors added)
        shutil.copytree(REPO / "tests" / "data" / "audio8_tts" / "tiny", a8, dirs_exist_ok=True)
    out["audio8_tts"] = a8
    for name, dtype in (("voxcpm2_f32", torch.float32), ("voxcpm2_bf16", torch.bfloat16)):
        path = root / name
        if not (path / "config.json").is_file():
            v2.write_checkpoint(path, v2.TINY_V2, seed=7, dtype=dtype)
        out[name] = path
    return out


def string_merges_copy(folder: Path, dst: Path) -> Path:
    """``folder`` with tokenizer.json's merges as ``"a b"`` strings (what tokenizers < 0.20 saved;
    0.20+ saves ``["a", "b"]`` pairs, which VoxCPM.cpp copies into a GGUF that ggml cannot read)."""
    if not (dst / "config.json").is_file():
        shutil.copytree(folder, dst, dirs_exist_ok=True)
        path = dst / "tokenizer.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return dst


def reference_wavs(work: Path) -> dict[str, Path]:
    import numpy as np
    import soundfile as sf

    out = {}
    for family, rate, n in (("omnivoice", 24000, 24000), ("voxcpm1", 16000, 3000), ("voxcpm2", 16000, 3000),
                            ("audio8_tts", 44100, 22050)):
        rng = np.random.default_rng(3)
        t = np.arange(n) / rate
        wave = 0.4 * np.sin(2 * np.pi * 180 * t) + 0.2 * np.sin(2 * np.pi * 414 * t + 0.5)
        wave = (wave * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)) + rng.normal(0, 0.02, n)).astype(np.float32)
        out[family] = work / f"ref_{family}.wav"
        sf.write(out[family], wave, rate, subtype="FLOAT")
    return out


# -- converters -------------------------------------------------------------------------------
def omnivoice_cpp(args: argparse.Namespace, ckpts: dict[str, Path], work: Path) -> list[tuple[Row, Callable]]:
    checkout = args.omnivoice_cpp
    commit = commit_of(checkout)
    scratch = work / "omnivoice_cpp"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "checkpoints").mkdir(parents=True)
    shutil.copy2(checkout / "convert.py", scratch / "convert.py")  # it reads ./checkpoints, writes ./models
    (scratch / "checkpoints" / "OmniVoice").symlink_to(ckpts["omnivoice"].resolve())
    models = scratch / "models"
    jobs: list[tuple[Row, Callable]] = []

    def convert() -> None:
        run([args.omnivoice_python, "convert.py"], cwd=scratch)

    lm, codec = models / "omnivoice-base-F32.gguf", models / "omnivoice-tokenizer-F32.gguf"
    jobs.append((Row("omnivoice.cpp convert.py", commit, "omnivoice", "tiny F32", lm.name), convert))
    jobs += scale_rows(work, "omnivoice", ckpts["omnivoice"], "tiny F32")
    for qtype in OMNIVOICE_QUANTS if args.omnivoice_quantize else ():
        for src in (lm, codec):
            dst = src.with_name(src.name.replace("-F32", f"-{qtype}"))
            jobs.append((Row("omnivoice.cpp quantize", commit, "omnivoice", "tiny F32", dst.name),
                         lambda s=src, d=dst, q=qtype: run([args.omnivoice_quantize, s, d, q])))
    return jobs


def scale_rows(work: Path, family: str, folder: Path, checkpoint: str) -> list[tuple[Row, Callable]]:
    """Our own bf16 and Q8_0 packages of ``folder``: what quantizing drifts, for scale."""
    out = []
    for wtype in ("bf16", "q8_0"):
        dst = work / "packages" / f"{family}-{wtype}.gguf"
        dst.parent.mkdir(parents=True, exist_ok=True)
        out.append((Row("audiocpp package (for scale)", "this repo", family, checkpoint, dst.name),
                    lambda d=dst, t=wtype: run([Path(sys.executable).parent / "audiocpp", "package", "--spec",
                                                REPO / "model_specs" / f"{family}.json", "--input", folder,
                                                "--type", t, "--out", d, "--overwrite"])))
    return out


def omnivoice_loads(models: Path) -> dict[str, dict[str, Any]]:
    """Each omnivoice.cpp file -> how to load it: an LM with the F32 codec, a codec with the F32 LM."""
    lm, codec = models / "omnivoice-base-F32.gguf", models / "omnivoice-tokenizer-F32.gguf"
    out: dict[str, dict[str, Any]] = {lm.name: {"path": lm, "options": {"codec": str(codec)}}}
    for path in sorted(models.glob("*.gguf")):
        if path.name.startswith("omnivoice-base-") and path != lm:
            out[path.name] = {"path": path, "options": {"codec": str(codec)}}
        elif path.name.startswith("omnivoice-tokenizer-") and path != codec:
            out[path.name] = {"path": lm, "options": {"codec": str(path)}}
    return out


def voxcpm_cpp(args: argparse.Namespace, ckpts: dict[str, Path], work: Path) -> list[tuple[Row, Callable]]:
    checkout = args.voxcpm_cpp
    commit = commit_of(checkout)
    script = checkout / "scripts" / "convert_voxcpm_to_gguf.py"
    out_dir = work / "voxcpm_cpp"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[Row, Callable]] = []
    for name in ("voxcpm1_05b_f32", "voxcpm1_05b_bf16", "voxcpm1_15_f32", "voxcpm1_15_bf16",
                 "voxcpm1_05b_f32_strmerges", "voxcpm1_15_f32_strmerges", "voxcpm1_05b_w256_f32_strmerges",
                 "voxcpm2_f32"):
        family = "voxcpm2" if name.startswith("voxcpm2") else "voxcpm1"
        src = out_dir / f"{name}.gguf"
        jobs.append((Row("VoxCPM.cpp convert_voxcpm_to_gguf.py", commit, family, name, src.name,
                         claimed=family == "voxcpm1"),
                     lambda c=ckpts[name], s=src: run([args.voxcpm_python, script, c, "--output", s],
                                                      cwd=out_dir)))
        if not args.voxcpm_quantize or family != "voxcpm1" or "bf16" in name:
            continue
        pairs = not name.endswith("strmerges")  # ggml's GGUF reader refuses pair merges (type 9 arrays)
        combos = (("Q8_0", "mixed"),) if pairs else VOXCPM_WIDE if "w256" in name else VOXCPM_NARROW
        for qtype, mode in combos:
            dst = out_dir / f"{name}-{qtype.lower()}-vae-{mode}.gguf"
            jobs.append((Row("VoxCPM.cpp voxcpm_quantize", commit, family, name, dst.name, claimed=not pairs),
                         lambda s=src, d=dst, q=qtype, m=mode: run(
                             [args.voxcpm_quantize, "--input", s, "--output", d, "--type", q,
                              "--audio-vae-mode", m, "--threads", "1"])))
    return jobs


def audio_cpp(args: argparse.Namespace, ckpts: dict[str, Path], work: Path) -> list[tuple[Row, Callable]]:
    checkout = args.audio_cpp
    commit = commit_of(checkout)
    out_dir = work / "audio_cpp"
    out_dir.mkdir(parents=True, exist_ok=True)
    families = {p.stem for p in (checkout / "model_specs").glob("*.json")}
    layouts = {
        "omnivoice": ("omnivoice", ["weights=model.safetensors",
                                    "audio_tokenizer_weights=audio_tokenizer/model.safetensors"]),
        "voxcpm2": ("voxcpm2_f32", ["weights=model.safetensors", "audiovae_weights=audiovae.safetensors"]),
        "voxcpm1": ("voxcpm1_15_f32", ["weights=model.safetensors",
                                       "audiovae_weights=audiovae.safetensors"]),
    }
    runs = [(family, ckpt, inputs, wtype) for family, (ckpt, inputs) in layouts.items()
            for wtype in args.audiocpp_types.split(",")]
    # VoxCPM2 checkpoints are bf16: "orig" keeps them BF16
    runs.append(("voxcpm2", "voxcpm2_bf16", layouts["voxcpm2"][1], "orig"))
    specs = {f: checkout / "model_specs" / f"{f}.json" for f in families}
    if args.audio8_spec:  # audio.cpp added audio8_tts after release 0.4: its spec file from a later commit
        families.add("audio8_tts")
        specs["audio8_tts"] = args.audio8_spec
        runs += [("audio8_tts", "audio8_tts",
                  ["model_weights=model.safetensors", "codec_weights=codec.safetensors"], t)
                 for t in args.audiocpp_types.split(",") if t != "q4_k"]
        scale = scale_rows(work, "audio8_tts", ckpts["audio8_tts"], "audio8_tts")
    else:
        scale = []
    jobs: list[tuple[Row, Callable]] = []
    for family, ckpt, inputs, wtype in runs:
        if family not in families:
            continue
        folder = ckpts[ckpt]
        dst = out_dir / f"{family}-{ckpt}-{wtype}.gguf"

        def job(f=family, fo=folder, i=inputs, d=dst, t=wtype) -> None:
            _vae_safetensors(fo)
            _audio8_codec_safetensors(fo)
            cmd = [args.audiocpp_gguf, "--family", f, "--root", fo, "--output", d, "--type", t, "--overwrite",
                   "--model-spec", specs[f]]
            for item in i:
                ns, rel = item.split("=")
                cmd += ["--input", f"{ns}={fo / rel}"]
            run(cmd)

        jobs.append((Row("audio.cpp audiocpp_gguf", commit, family, ckpt, dst.name), job))
    return jobs + scale


def _audio8_codec_safetensors(folder: Path) -> None:
    """audio.cpp's first Audio8 step (``convert_audio8_tts_codec.py``: codec.pth -> codec.safetensors,
    weight norm fused) is not in any checkout at hand: our reproduction of it (tools/audio8_tts)."""
    pth, st = folder / "codec.pth", folder / "codec.safetensors"
    if pth.is_file() and not st.is_file():
        from safetensors.numpy import save_file

        from tools.audio8_tts.convert_audiocpp import fuse_codec

        save_file(fuse_codec(pth), str(st))


def _vae_safetensors(folder: Path) -> None:
    """audio.cpp's VoxCPM specs read ``audiovae.safetensors`` (its docs convert the .pth first)."""
    pth, st = folder / "audiovae.pth", folder / "audiovae.safetensors"
    if pth.is_file() and not st.is_file():
        import torch
        from safetensors.torch import save_file

        state = torch.load(pth, map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        save_file({k: v.contiguous() for k, v in state.items()}, str(st))


# -- main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--omnivoice-cpp", type=Path)
    ap.add_argument("--omnivoice-quantize", type=Path)
    ap.add_argument("--omnivoice-python", type=Path,
                    default=REPO / ".ref-envs" / "omnivoice" / "bin" / "python")
    ap.add_argument("--voxcpm-cpp", type=Path)
    ap.add_argument("--voxcpm-quantize", type=Path)
    ap.add_argument("--voxcpm-python", type=Path)
    ap.add_argument("--audio-cpp", type=Path)
    ap.add_argument("--audiocpp-gguf", type=Path)
    ap.add_argument("--audiocpp-types", default="orig,f16,bf16,q8_0,q4_k")
    ap.add_argument("--audio8-spec", type=Path,
                    help="audio.cpp's model_specs/audio8_tts.json (after release 0.4)")
    ap.add_argument("--json", type=Path, help="write the rows here (default WORK/matrix.json)")
    ap.add_argument("--checkpoints", help="comma-separated checkpoint names: run only their rows")
    args = ap.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    ckpts = build_checkpoints(work, args.omnivoice_python)
    comparer = Comparer(reference_wavs(work))

    jobs: list[tuple[Row, Callable]] = []
    if args.omnivoice_cpp:
        jobs += omnivoice_cpp(args, ckpts, work)
    if args.voxcpm_cpp:
        jobs += voxcpm_cpp(args, ckpts, work)
    if args.audio_cpp and args.audiocpp_gguf:
        jobs += audio_cpp(args, ckpts, work)
    if args.checkpoints:
        keep = set(args.checkpoints.split(","))
        jobs = [(row, job) for row, job in jobs if row.checkpoint in keep]
    rows = []
    for row, job in jobs:
        rows.append(row)
        out = _output_path(work, row)
        try:
            job()
        except Exception as exc:  # a converter that fails is a row of the matrix, not the end of it
            row.result = "converter failed: " + " ".join(str(exc).split())
            _print(row)
            continue
        try:
            row.types = gguf_types(out)
            target, options = _load_target(row, out)
            drift = comparer.compare(row.family, ckpts[_folder_key(row)], target, options)
            row.ok, row.result, row.drift = True, "loads", drift.summary()
        except Exception as exc:
            row.result = f"load failed: {type(exc).__name__}: " + " ".join(str(exc).split())
            if not hasattr(exc, "hint"):
                traceback.print_exc()
        _print(row)
    (args.json or work / "matrix.json").write_text(json.dumps([asdict(r) for r in rows], indent=2),
                                                   encoding="utf-8")
    print()
    print("| converter | commit | family | checkpoint | output | tensor types | result | drift vs folder |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        result = r.result if r.claimed else f"{r.result} (layout not claimed)"
        print(f"| {r.converter} | {r.commit} | {r.family} | {r.checkpoint} | `{r.output}` | {r.types} "
              f"| {result} | {r.drift} |")
    return 0 if all(r.ok for r in rows if r.claimed) else 1


def _output_path(work: Path, row: Row) -> Path:
    sub = {"omnivoice.cpp": "omnivoice_cpp/models", "VoxCPM.cpp": "voxcpm_cpp", "audio.cpp": "audio_cpp",
           "audiocpp": "packages"}
    return work / sub[row.converter.split()[0]] / row.output


def _folder_key(row: Row) -> str:
    return "omnivoice" if row.family == "omnivoice" else row.checkpoint


def _load_target(row: Row, out: Path) -> tuple[Path, dict[str, Any] | None]:
    if row.converter.startswith("omnivoice.cpp"):
        load = omnivoice_loads(out.parent)[out.name]
        return load["path"], load["options"]
    return out, None


def _print(row: Row) -> None:
    print(f"{row.converter:40s} {row.checkpoint:18s} {row.output:45s} {row.result} {row.drift}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
