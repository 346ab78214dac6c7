#!/usr/bin/env python3
"""Write an OmniVoice snapshot folder as omnivoice.cpp's two GGUFs (our own writer of that
layout, for tests: docs/families/omnivoice.md, "Checkpoints and layouts", describes it).

- ``omnivoice-base-<TYPE>.gguf`` (architecture ``omnivoice-lm``): LM hyper-parameters,
  ``omnivoice.*`` keys (codebooks, mask id, special token ids), the tokenizer as
  ``tokenizer.ggml.{model,tokens,merges}``, and every LM tensor under its own name except
  ``codebook_layer_offsets``. ``--type f32`` keeps the native dtype; ``bf16`` and ``q8_0``
  convert the 2-D weights (q8_0 spares the embedding tables, as a requantizer would not
  touch lookups we read row by row).
- ``omnivoice-tokenizer-F32.gguf`` (``omnivoice-tokenizer``): codec hyper-parameters and the
  codec tensors minus ``decoder_semantic.*``, ``fc1.*``, the RVQ training statistics and the
  weight-norm parametrizations, plus the folded HuBERT positional conv weight.

Usage: python convert_omnivoice_cpp.py SNAPSHOT_DIR OUT_DIR [--type f32|bf16|q8_0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np
import torch
from safetensors.torch import load_file

from audiocpp.engine.tokenizer import add_to_gguf_writer, gguf_tokenizer_metadata, load_tokenizer

SPECIALS = ("denoise", "lang_start", "lang_end", "instruct_start", "instruct_end", "text_start", "text_end")
CODEC_SKIP = ("decoder_semantic.", "fc1.")
CODEC_SKIP_SUFFIX = (".cluster_size", ".embed_avg", ".inited")
POS_CONV = "semantic_model.encoder.pos_conv_embed.conv"


def _add(writer: gguf.GGUFWriter, name: str, tensor: torch.Tensor, kind: str) -> None:
    if kind == "bf16" and tensor.dim() == 2 and tensor.is_floating_point():
        raw = tensor.to(torch.bfloat16).view(torch.int16).numpy()
        writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
        return
    if (kind == "q8_0" and tensor.dim() == 2 and tensor.shape[-1] % 32 == 0
            and not name.endswith(("embed_tokens.weight", "audio_embeddings.weight"))):
        data = gguf.quants.quantize(tensor.to(torch.float32).numpy(), gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        return
    writer.add_tensor(name, np.ascontiguousarray(tensor.numpy()))


def write_lm(src: Path, out: Path, kind: str) -> Path:
    cfg = json.loads((src / "config.json").read_text())
    llm = cfg["llm_config"]
    rope = llm.get("rope_parameters") or {}
    path = out / f"omnivoice-base-{kind.upper()}.gguf"
    w = gguf.GGUFWriter(str(path), "omnivoice-lm")
    w.add_name("OmniVoice")
    a = "omnivoice-lm"
    heads = llm["num_attention_heads"]
    head_dim = llm.get("head_dim") or llm["hidden_size"] // heads
    for key, value in (("block_count", llm["num_hidden_layers"]), ("embedding_length", llm["hidden_size"]),
                       ("feed_forward_length", llm["intermediate_size"]), ("attention.head_count", heads),
                       ("attention.head_count_kv", llm.get("num_key_value_heads", heads)),
                       ("attention.key_length", head_dim), ("attention.value_length", head_dim),
                       ("vocab_size", llm["vocab_size"]), ("context_length", llm["max_position_embeddings"])):
        w.add_uint32(f"{a}.{key}", int(value))
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(llm["rms_norm_eps"]))
    w.add_float32(f"{a}.rope.freq_base", float(rope.get("rope_theta", llm.get("rope_theta", 1e6))))
    w.add_bool("omnivoice.tie_word_embeddings", bool(llm.get("tie_word_embeddings", True)))
    for key in ("num_audio_codebook", "audio_vocab_size", "audio_mask_id"):
        w.add_uint32(f"omnivoice.{key}", int(cfg[key]))
    w.add_array("omnivoice.audio_codebook_weights", [int(x) for x in cfg["audio_codebook_weights"]])
    tokenizer_json = json.loads((src / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in tokenizer_json.get("added_tokens", [])}
    for name in SPECIALS:
        w.add_uint32(f"omnivoice.special.{name}", int(added[f"<|{name}|>"]))
    add_to_gguf_writer(w, gguf_tokenizer_metadata(load_tokenizer(src), "qwen2"))
    tensors = load_file(str(src / "model.safetensors"))
    for name in sorted(tensors):
        if name != "codebook_layer_offsets":
            _add(w, name, tensors[name], kind)
    _finish(w)
    return path


def write_codec(src: Path, out: Path) -> Path:
    cfg = json.loads((src / "audio_tokenizer" / "config.json").read_text())
    ac, sem = cfg["acoustic_model_config"], cfg["semantic_model_config"]
    path = out / "omnivoice-tokenizer-F32.gguf"
    w = gguf.GGUFWriter(str(path), "omnivoice-tokenizer")
    w.add_name("OmniVoice-tokenizer")
    for key in ("sample_rate", "semantic_sample_rate", "downsample_factor", "codebook_size", "codebook_dim"):
        w.add_uint32(f"omnivoice.{key}", int(cfg[key]))
    hop = int(np.prod(ac["downsampling_ratios"]))
    for key, value in (("encoder_hidden_size", ac["encoder_hidden_size"]),
                       ("decoder_hidden_size", ac["decoder_hidden_size"]), ("hidden_size", ac["hidden_size"]),
                       ("n_codebooks", ac.get("n_codebooks", 9)), ("hop_length", hop)):
        w.add_uint32(f"omnivoice.acoustic.{key}", int(value))
    w.add_array("omnivoice.acoustic.upsampling_ratios", [int(x) for x in ac["upsampling_ratios"]])
    w.add_array("omnivoice.acoustic.downsampling_ratios", [int(x) for x in ac["downsampling_ratios"]])
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
                "num_conv_pos_embeddings", "num_conv_pos_embedding_groups"):
        w.add_uint32(f"omnivoice.semantic.{key}", int(sem[key]))
    w.add_uint32("omnivoice.semantic.num_feat_extract_layers", len(sem["conv_dim"]))
    for key in ("conv_dim", "conv_kernel", "conv_stride"):
        w.add_array(f"omnivoice.semantic.{key}", [int(x) for x in sem[key]])
    w.add_float32("omnivoice.semantic.layer_norm_eps", float(sem.get("layer_norm_eps", 1e-5)))
    tensors = load_file(str(src / "audio_tokenizer" / "model.safetensors"))
    g = tensors[f"{POS_CONV}.parametrizations.weight.original0"]
    v = tensors[f"{POS_CONV}.parametrizations.weight.original1"]
    tensors[f"{POS_CONV}.weight"] = torch._weight_norm(v, g, 2)
    for name in sorted(tensors):
        if name.startswith(CODEC_SKIP) or name.endswith(CODEC_SKIP_SUFFIX) \
                or "parametrizations.weight.original" in name:
            continue
        _add(w, name, tensors[name], "f32")
    _finish(w)
    return path


def _finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--type", choices=("f32", "bf16", "q8_0"), default="f32")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    lm = write_lm(args.snapshot, args.out, args.type)
    codec = write_codec(args.snapshot, args.out)
    print(json.dumps({"lm": str(lm), "codec": str(codec)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
