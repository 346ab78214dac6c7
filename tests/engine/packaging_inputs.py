"""Inputs for the packaging tests: a test spec and tiny checkpoints in upstream layouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.spec.validate import builtin_spec_path, validate_spec

# >= 64 bytes with ns/
LONG_NAME = "encoder.blocks.0.attention.relative_position_bias_table_projection.weight"
NAME_63 = "w/" + "a" * 54 + ".weight"  # exactly 63 bytes: the longest name kept as is
NAME_64 = "w/" + "a" * 55 + ".weight"  # 64 bytes: aliased


def make_spec_data() -> dict[str, Any]:
    """The omnivoice spec with controlled quantization rules and a third namespace."""
    data = json.loads(builtin_spec_path("omnivoice").read_text(encoding="utf-8"))
    data["family"] = "pkgtest"
    data["quantization"] = {
        "keep_types": [{"pattern": "codec/*", "type": "f32"}, {"pattern": "w/half.*", "type": "f16"}],
        "lookup_tables": ["w/embed.weight", "codec/codebook.*"],
    }
    for src in data["sources"]:
        if src["id"] == "package":
            src["tensors"] = {"w": {"source": "package:", "prefix": "w"},
                              "codec": {"source": "package:", "prefix": "codec"}}
            src["optional_tensors"] = {"extra": {"source": "package:", "prefix": "extra"}}
        elif src["id"] == "hf_folder":
            src["tensors"] = {"w": "model:model.safetensors", "codec": "model:codec/model.safetensors"}
            src["optional_tensors"] = {"extra": "model:extra.safetensors"}
            src["files"] = {k: v.replace("audio_tokenizer/", "codec/") for k, v in src["files"].items()
                            if not k.startswith("audio_tokenizer/")}
            src["files"]["codec_config"] = "model:codec/config.json"
    package = next(s for s in data["sources"] if s["id"] == "package")
    package["files"] = {k: v for k, v in package["files"].items() if not k.startswith("audio_tokenizer/")}
    package["files"]["codec_config"] = "package:codec/config.json"
    data["sources"] = [s for s in data["sources"] if s["id"] in ("hf_folder", "package")]
    return data


def make_spec() -> ModelSpec:
    return validate_spec(make_spec_data(), origin="test spec")


def lm_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    return {
        "embed.weight": r(50, 64),  # lookup table
        "layers.0.q_proj.weight": r(96, 64) * 0.05,  # block-quantizable
        "layers.0.q_proj.bias": r(96),  # 1-D
        "layers.0.odd.weight": r(16, 48),  # row 48: not a multiple of 32
        "layers.0.norm.weight": r(64),
        "layers.0.pos_bias": r(8, 64),  # 2-D, not *.weight
        "half.proj.weight": r(32, 64),  # spec keep-type f16
        "conv.weight": r(16, 8, 3),  # 3-D conv kernel
        "conv2d.weight": r(4, 2, 3, 3),  # 4-D
        "big.weight": r(2, 2, 2, 2, 32),  # 5-D: folded into 4 ggml dims
        "scale": torch.tensor(0.125),  # scalar
        "bf.weight": r(8, 64).to(torch.bfloat16),
        "fp16.weight": r(8, 64).to(torch.float16),
        "offsets": torch.arange(8, dtype=torch.int64) * 1025,
        "mask": torch.tensor([True, False, True]),
        "bytes": torch.tensor([0, 7, 255], dtype=torch.uint8),
        LONG_NAME: r(4, 32),
        NAME_63[2:]: r(2, 32),
        NAME_64[2:]: r(2, 32),
    }


def codec_tensors(seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "codebook.embed": torch.randn(16, 32, generator=g),
        "decoder.conv.weight": torch.randn(8, 4, 7, generator=g),
        "decoder.conv.bias": torch.randn(8, generator=g),
        "fc.weight": torch.randn(32, 64, generator=g),
    }


SIDECARS = {
    "config.json": b'{"model_type": "omnivoice", "x": 1}\n',
    "tokenizer.json": "{\"model\": {\"vocab\": {\"\u00e9\": 0}}}".encode(),
    "tokenizer_config.json": b"{}",
    "codec/config.json": b'{"codec": true}',
    "chat_template.jinja": b"{{ messages }}\xe2\x80\x94\n",
}


def model_folder(root: Path, *, skip: tuple[str, ...] = ()) -> Path:
    """A model folder in the test spec's hf_folder layout."""
    (root / "codec").mkdir(parents=True, exist_ok=True)
    if "w" not in skip:
        save_file(lm_tensors(), str(root / "model.safetensors"))
    if "codec" not in skip:
        save_file(codec_tensors(), str(root / "codec" / "model.safetensors"))
    for name, data in SIDECARS.items():
        if name not in skip:
            (root / name).write_bytes(data)
    return root


def omnivoice_folder(root: Path) -> Path:
    """A tiny folder in the k2-fsa/OmniVoice layout (not a runnable model: names and files only)."""
    g = torch.Generator().manual_seed(3)
    (root / "audio_tokenizer").mkdir(parents=True, exist_ok=True)
    save_file({"llm.embed_tokens.weight": torch.randn(40, 64, generator=g),
               "llm.layers.0.self_attn.q_proj.weight": torch.randn(64, 64, generator=g),
               "llm.norm.weight": torch.ones(64), "codebook_layer_offsets": torch.arange(8) * 1025},
              str(root / "model.safetensors"))
    save_file({"acoustic_decoder.conv1.weight": torch.randn(8, 4, 7, generator=g),
               "quantizer.quantizers.0.codebook.embed": torch.randn(16, 64, generator=g),
               "fc2.weight": torch.randn(64, 64, generator=g)},
              str(root / "audio_tokenizer" / "model.safetensors"))
    (root / "config.json").write_text(json.dumps({"model_type": "omnivoice"}), encoding="utf-8")
    for name in ("tokenizer.json", "tokenizer_config.json", "audio_tokenizer/config.json",
                 "audio_tokenizer/preprocessor_config.json"):
        (root / name).write_text("{}", encoding="utf-8")
    return root
