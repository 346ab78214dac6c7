"""The demo checkpoint used when no ``--model`` is given: a deterministic tiny OmniVoice with
random weights, in the k2-fsa/OmniVoice folder layout, built with this package's own modules
(no transformers) on first use and cached under ``$AUDIOCPP_CACHE_DIR/demo/omnivoice-<version>/``.

It runs the whole pipeline (tokenizer, prompt, MaskGIT, codec, post-processing) in about a
second; its audio is not speech. Dims: a 2-layer Qwen3 (hidden 64) and a codec with the real
geometry (24 kHz, hop 960, 25 fps, 8 codebooks) at tiny widths.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

RECIPE = 1  # bump when the demo checkpoint changes

LLM = {"model_type": "qwen3", "vocab_size": 1100, "hidden_size": 64, "intermediate_size": 128,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "hidden_act": "silu",
       "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": True,
       "attention_bias": False, "use_sliding_window": False}
CONFIG = {"architectures": ["OmniVoice"], "model_type": "omnivoice", "audio_vocab_size": 1025,
          "audio_mask_id": 1024, "num_audio_codebook": 8, "audio_codebook_weights": [8, 8, 6, 6, 4, 4, 2, 2],
          "llm_config": LLM}
CODEC_CONFIG = {
    "architectures": ["HiggsAudioV2TokenizerModel"], "model_type": "higgs_audio_v2_tokenizer",
    "sample_rate": 24000, "semantic_sample_rate": 16000, "downsample_factor": 320,
    "target_bandwidths": [0.5, 1, 1.5, 2], "codebook_size": 1024, "codebook_dim": 8, "kernel_size": 3,
    "channel_ratios": [1, 1], "strides": [1, 1], "block_dilations": [1, 1], "unit_kernel_size": 3,
    "acoustic_model_config": {"model_type": "dac", "encoder_hidden_size": 4, "decoder_hidden_size": 64,
                              "hidden_size": 16, "downsampling_ratios": [8, 5, 4, 2, 3],
                              "upsampling_ratios": [8, 5, 4, 2, 3]},
    "semantic_model_config": {"model_type": "hubert", "hidden_size": 32, "num_hidden_layers": 2,
                              "num_attention_heads": 2, "intermediate_size": 64, "conv_dim": [16] * 7,
                              "conv_kernel": [10, 3, 3, 3, 3, 2, 2], "conv_stride": [5, 2, 2, 2, 2, 2, 2],
                              "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4,
                              "mask_time_prob": 0.0, "feat_extract_norm": "group",
                              "do_stable_layer_norm": False},
}
PREPROCESSOR = {"feature_extractor_type": "DacFeatureExtractor", "feature_size": 1, "hop_length": 960,
                "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
                "sampling_rate": 24000}
TOKENIZER_CONFIG = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>",
                    "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "bos_token": None,
                    "add_prefix_space": False,
                    "extra_special_tokens": ["<|im_start|>", "<|im_end|>", "<|denoise|>", "<|lang_start|>",
                                             "<|lang_end|>", "<|instruct_start|>", "<|instruct_end|>",
                                             "<|text_start|>", "<|text_end|>"]}


def demo_dir() -> Path:
    from audiocpp.engine.weights.package import cache_dir

    try:
        ver = version("audiocpp")
    except PackageNotFoundError:  # running from a source tree that is not installed
        ver = "dev"
    return cache_dir() / "demo" / f"omnivoice-{ver}"


def _complete(folder: Path) -> bool:
    stamp = folder / "demo.json"
    try:
        return json.loads(stamp.read_text()).get("recipe") == RECIPE
    except (OSError, json.JSONDecodeError):
        return False


def demo_checkpoint() -> Path:
    """The demo folder, built atomically (in a temporary sibling, then renamed) if missing."""
    target = demo_dir()
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".omnivoice-build-", dir=target.parent))
    try:
        write_demo(tmp)
        if target.exists() and not _complete(target):
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished first
            if not _complete(target):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fill(module: torch.nn.Module, gen: torch.Generator, *, codec: bool) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("alpha"):
                p.copy_(1.0 + 0.5 * torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                fan_in = math.prod(p.shape[1:]) if "conv_t1" not in name else p.shape[0] * p.shape[2]
                std = 1.0 / math.sqrt(fan_in) if codec else 0.2
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))


def write_demo(folder: Path, seed: int = 0) -> None:
    """Write the demo checkpoint into ``folder`` (deterministic for a given ``seed``)."""
    from safetensors.torch import save_file

    from .codec import HiggsAudioV2Codec
    from .config import CodecConfig, OmniVoiceConfig
    from .model import OmniVoiceLM
    from .tiny_tokenizer import build_tokenizer

    gen = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    if tokenizer.get_vocab_size() != LLM["vocab_size"]:
        raise RuntimeError(f"demo tokenizer has {tokenizer.get_vocab_size()} tokens, "
                           f"expected {LLM['vocab_size']}")
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2))
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=2))
    lm = OmniVoiceLM(OmniVoiceConfig.from_dict(CONFIG))
    _fill(lm, gen, codec=False)
    state = {k: v.contiguous() for k, v in lm.state_dict().items()}
    state["codebook_layer_offsets"] = lm.codebook_layer_offsets.clone()
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})

    sub = folder / "audio_tokenizer"
    sub.mkdir()
    (sub / "config.json").write_text(json.dumps(CODEC_CONFIG, indent=2))
    (sub / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    codec = HiggsAudioV2Codec(CodecConfig.from_dict(CODEC_CONFIG))
    _fill(codec, gen, codec=True)
    with torch.no_grad():
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=gen))
    save_file({k: v.contiguous() for k, v in codec.state_dict().items()}, str(sub / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "demo.json").write_text(json.dumps({"recipe": RECIPE, "seed": seed,
                                                  "note": "random weights: the audio is not speech"}))
