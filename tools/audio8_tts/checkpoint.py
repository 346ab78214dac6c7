"""Audio8 TTS checkpoints in the upstream layout, built with the upstream classes (tiny for the
goldens, real-size for the benchmark). Runs in the reference env (.ref-envs/audio8).

The folder holds what the HF snapshot holds: ``config.json`` (flat ``arktts``), ``model.safetensors``
(bf16, upstream names), ``codec.pth`` (``torch.save`` of the upstream codec's state dict: conv
weight norm as ``*.parametrizations.weight.original0/1``, VQ projections as ``*.weight_g/_v``),
``tokenizer.json`` / ``tokenizer_config.json`` / ``special_tokens_map.json``,
``processor_config.json`` and ``generation_config.json``.

The tiny tokenizer is a byte-level BPE (Qwen2's pre-tokenizer) trained on a fixed corpus, with
the Audio8 special tokens after it in the real order (``<|endoftext|>``, ``<|im_start|>``,
``<|im_end|>``, ``<|pad|>``, phoneme start/end, ``<|text|>``, ``<|voice|>``, ``<|interleave|>``,
audio start/end/pad, then ``<|semantic:0..N-1|>``), and the config's ids point at them: the same
layout as the real 151643.. ids, scaled down (Qwen's other added tokens are left out).

The codec is upstream's blocks with smaller sizes: upstream hard-codes them, so
:func:`build_codec` composes ``ArkttsEncoder`` / ``ArkttsDecoder`` / ``ArkttsDownsampleQuantizer``
from upstream's own modules with the sizes of the config's ``codec_*`` keys (what our
``CodecConfig`` reads); the forward code is upstream's. The tiny ``post_module`` has fewer KV
heads than query heads, as the real checkpoint's.

Usage (library): ``write_checkpoint(folder, upstream_modules(path), TINY, seed=0)``.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DEFAULT_UPSTREAM = Path("/work/upstream/audio8")
PACKAGE = "audio8_tts_0_6B_preview"
UPSTREAM_FILES = ("modeling_arktts.py", "modeling_arktts_codec.py", "processing_arktts.py",
                  "configuration_arktts.py")

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<|phoneme_start|>", "<|phoneme_end|>",
            "<|text|>", "<|voice|>", "<|interleave|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>")
BPE_VOCAB = 300
TINY_CODEBOOK = 32

#: The real codec sizes (CodecConfig defaults).
REAL_CODEC = {
    "codec_encoder_dim": 64, "codec_encoder_strides": [2, 4, 8, 8], "codec_encoder_transformer_layers": 4,
    "codec_encoder_head_dim": 64, "codec_encoder_window": 512, "codec_latent_dim": 1024,
    "codec_decoder_dim": 1536, "codec_decoder_strides": [8, 8, 4, 2], "codec_quantizer_window": 128,
    "codec_pre_n_layer": 8, "codec_pre_n_head": 16, "codec_pre_n_local_heads": 16, "codec_pre_head_dim": 64,
    "codec_pre_intermediate_size": 3072, "codec_post_n_layer": 8, "codec_post_n_head": 16,
    "codec_post_n_local_heads": 8, "codec_post_head_dim": 64, "codec_post_intermediate_size": 1216,
    "codec_semantic_codebook_size": 4096, "codec_residual_codebooks": 9, "codec_residual_codebook_size": 1024,
    "codec_codebook_dim": 8,
}
TINY_CODEC = {
    **REAL_CODEC, "codec_encoder_dim": 4, "codec_encoder_transformer_layers": 1, "codec_encoder_head_dim": 16,
    "codec_encoder_window": 4, "codec_latent_dim": 32, "codec_decoder_dim": 48, "codec_quantizer_window": 4,
    "codec_pre_n_layer": 2, "codec_pre_n_head": 4, "codec_pre_n_local_heads": 4, "codec_pre_head_dim": 8,
    "codec_pre_intermediate_size": 48, "codec_post_n_layer": 2, "codec_post_n_head": 4,
    "codec_post_n_local_heads": 2, "codec_post_head_dim": 8, "codec_post_intermediate_size": 40,
    "codec_semantic_codebook_size": TINY_CODEBOOK, "codec_residual_codebook_size": 16,
    "codec_codebook_dim": 4,
}


def _tiny_ids(bpe: int = BPE_VOCAB, codebook: int = TINY_CODEBOOK) -> dict[str, int]:
    first_semantic = bpe + len(SPECIALS)
    return {"pad_token_id": bpe, "eos_token_id": bpe + 2, "semantic_begin_id": first_semantic,
            "semantic_end_id": first_semantic + codebook - 1, "vocab_size": first_semantic + codebook + 2}


#: A tiny 0.6B-style config: GQA, qkv bias, fast_dim != dim (fast_project_in is a Linear).
TINY: dict[str, Any] = {
    "architectures": ["ArkttsModel"], "model_type": "arktts", **_tiny_ids(),
    "dim": 64, "n_layer": 2, "n_head": 4, "n_local_heads": 2, "head_dim": 16, "intermediate_size": 96,
    "max_seq_len": 512, "rope_base": 1000000.0, "norm_eps": 1e-6, "attention_qkv_bias": True,
    "attention_qk_norm": False, "attention_o_bias": False, "tie_word_embeddings": True,
    "codebook_size": TINY_CODEBOOK, "num_codebooks": 10, "n_fast_layer": 2, "fast_dim": 48, "fast_n_head": 4,
    "fast_n_local_heads": 2, "fast_head_dim": 12, "fast_intermediate_size": 80,
    "fast_attention_qkv_bias": False, "fast_attention_qk_norm": False, "fast_attention_o_bias": False,
    "norm_fastlayer_input": True,
    "codec_filename": "codec.pth", "codec_sample_rate": 44100, "codec_frame_size": 2048,
    "ras_window_size": 10, "ras_temperature": 1.0, "ras_top_p": 0.9, "dtype": "bfloat16",
    **TINY_CODEC,
}

#: The real 0.6B config (upstream config.json) with the real codec, for the benchmark.
REAL: dict[str, Any] = {
    "architectures": ["ArkttsModel"], "model_type": "arktts", "vocab_size": 155776, "dim": 896, "n_layer": 24,
    "n_head": 14, "n_local_heads": 2, "head_dim": 64, "intermediate_size": 4864, "max_seq_len": 2048,
    "rope_base": 1000000.0, "norm_eps": 1e-6, "attention_qkv_bias": True, "attention_qk_norm": False,
    "attention_o_bias": False, "tie_word_embeddings": True, "codebook_size": 4096, "num_codebooks": 10,
    "semantic_begin_id": 151678, "semantic_end_id": 155773, "n_fast_layer": 4, "fast_dim": 896,
    "fast_n_head": 14, "fast_n_local_heads": 2, "fast_head_dim": 64, "fast_intermediate_size": 4864,
    "fast_attention_qkv_bias": False, "fast_attention_qk_norm": False, "fast_attention_o_bias": False,
    "norm_fastlayer_input": True, "codec_filename": "codec.pth", "codec_sample_rate": 44100,
    "codec_frame_size": 2048, "ras_window_size": 10, "ras_temperature": 1.0, "ras_top_p": 0.9,
    "eos_token_id": 151645, "pad_token_id": 151643, "dtype": "bfloat16",
}

_SENTENCES = (
    "Hello world. This is a test of the tiny speech model.",
    "The quick brown fox jumps over the lazy dog, again and again!",
    "convert the provided text to speech reference to the following: Text: Speech:",
    "system user assistant speaker Do you hear me? Yes, I can hear you very well.",
    "Numbers like 1, 2, 3, 42 and 2024 appear in text as well.",
    "你好，世界。今天天气很好。 Bonjour le monde. Hallo Welt.",
)


# -- upstream code ------------------------------------------------------------------------------
def upstream_modules(upstream: Path = DEFAULT_UPSTREAM) -> SimpleNamespace:
    """Import the upstream model package from a checkout (``model/audio8_tts_0_6B_preview``)."""
    root = Path(upstream) / "model"
    if not (root / PACKAGE / "modeling_arktts.py").is_file():
        raise SystemExit(f"{upstream} is not an Audio8_TTS checkout (no model/{PACKAGE}/modeling_arktts.py)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return SimpleNamespace(
        root=root / PACKAGE,
        model=importlib.import_module(f"{PACKAGE}.modeling_arktts"),
        codec=importlib.import_module(f"{PACKAGE}.modeling_arktts_codec"),
        processing=importlib.import_module(f"{PACKAGE}.processing_arktts"),
        configuration=importlib.import_module(f"{PACKAGE}.configuration_arktts"),
    )


def _bare(cls: type) -> Any:
    import torch.nn as nn

    obj = cls.__new__(cls)
    nn.Module.__init__(obj)
    return obj


def build_codec(up: SimpleNamespace, cfg: dict[str, Any]) -> Any:
    """An upstream ``ArkttsCodec`` with the sizes of ``cfg``'s ``codec_*`` keys, from upstream blocks."""
    import torch.nn as nn

    c = up.codec
    g = {**REAL_CODEC, **{k: v for k, v in cfg.items() if k.startswith("codec_")}}

    def window_transformer(n_layer: int, n_head: int, kv: int, hd: int, dim: int, ffn: int,
                           window: int) -> Any:
        tcfg = c.ArkttsCodecTransformerConfig(n_layer=n_layer, n_head=n_head, dim=dim, intermediate_size=ffn,
                                              n_local_heads=kv, head_dim=hd)
        return c.ArkttsCodecWindowTransformer(tcfg, dim, window_size=window)

    encoder = _bare(c.ArkttsEncoder)
    dim = g["codec_encoder_dim"]
    modules = [c._causal_wn_conv(1, dim, kernel_size=7)]
    strides = g["codec_encoder_strides"]
    for i, stride in enumerate(strides):
        dim *= 2
        block = _bare(c.ArkttsEncoderBlock)
        parts = [c.ArkttsResidualUnit(dim // 2, 1), c.ArkttsResidualUnit(dim // 2, 3),
                 c.ArkttsResidualUnit(dim // 2, 9), c.ArkttsSnake1d(dim // 2),
                 c._causal_wn_conv(dim // 2, dim, kernel_size=2 * stride, stride=stride)]
        if i == len(strides) - 1 and g["codec_encoder_transformer_layers"]:
            hd = g["codec_encoder_head_dim"]
            parts.append(window_transformer(g["codec_encoder_transformer_layers"], dim // hd, dim // hd, hd,
                                            dim, dim * 3, g["codec_encoder_window"]))
        else:
            parts.append(nn.Identity())
        block.block = nn.Sequential(*parts)
        modules.append(block)
    latent = g["codec_latent_dim"]
    modules += [c.ArkttsSnake1d(dim), c._causal_wn_conv(dim, latent, kernel_size=3)]
    encoder.block = nn.Sequential(*modules)

    decoder = _bare(c.ArkttsDecoder)
    channels = g["codec_decoder_dim"]
    modules = [c._causal_wn_conv(latent, channels, kernel_size=7)]
    out = channels
    for i, stride in enumerate(g["codec_decoder_strides"]):
        out = channels // 2 ** (i + 1)
        modules.append(c.ArkttsDecoderBlock(channels // 2 ** i, out, stride))
    modules += [c.ArkttsSnake1d(out), c._causal_wn_conv(out, 1, kernel_size=7), nn.Tanh()]
    decoder.model = nn.Sequential(*modules)

    q = _bare(c.ArkttsDownsampleQuantizer)
    q.semantic_quantizer = c.ArkttsResidualQuantizer(latent, 1, g["codec_semantic_codebook_size"],
                                                     g["codec_codebook_dim"])
    q.quantizer = c.ArkttsResidualQuantizer(latent, g["codec_residual_codebooks"],
                                            g["codec_residual_codebook_size"], g["codec_codebook_dim"])
    q.downsample = nn.Sequential(*(nn.Sequential(c.ArkttsCausalConv1d(latent, latent, kernel_size=2,
                                                                      stride=2),
                                                 c.ArkttsConvNeXtBlock(latent)) for _ in range(2)))
    q.upsample = nn.Sequential(*(nn.Sequential(c.ArkttsCausalConvTranspose1d(latent, latent, kernel_size=2,
                                                                             stride=2),
                                               c.ArkttsConvNeXtBlock(latent)) for _ in range(2)))
    q.pre_module = window_transformer(g["codec_pre_n_layer"], g["codec_pre_n_head"],
                                      g["codec_pre_n_local_heads"], g["codec_pre_head_dim"], latent,
                                      g["codec_pre_intermediate_size"], g["codec_quantizer_window"])
    q.post_module = window_transformer(g["codec_post_n_layer"], g["codec_post_n_head"],
                                       g["codec_post_n_local_heads"], g["codec_post_head_dim"], latent,
                                       g["codec_post_intermediate_size"], g["codec_quantizer_window"])
    q.semantic_predictor_module = nn.Identity()

    codec = _bare(getattr(c, "_audiocpp_original", c.ArkttsCodec))
    codec.encoder, codec.quantizer, codec.decoder = encoder, q, decoder
    return codec


def patch_codec_class(up: SimpleNamespace) -> None:
    """Make upstream's ``load_codec`` build :func:`build_codec` from the model config."""
    if getattr(up.codec, "_audiocpp_patched", False):
        return
    original = up.codec.ArkttsCodec

    class SizedCodec(original):  # type: ignore[misc,valid-type]
        def __new__(cls, config: Any = None) -> Any:
            return build_codec(up, config.to_dict() if config is not None else {})

    up.codec._audiocpp_original = original
    up.codec.ArkttsCodec = SizedCodec
    up.codec._audiocpp_patched = True


# -- random weights -----------------------------------------------------------------------------
def randomize(module: Any, seed: int, *, scale: dict[str, float] | None = None) -> None:
    """Deterministic weights that keep activations O(1) and logits spread (not upstream's init)."""
    import torch

    scale = scale or {}
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            def normal(std: float, p=p) -> torch.Tensor:
                return torch.randn(p.shape, generator=gen) * std

            leaf = name.rsplit(".", 1)[-1]
            if name.endswith("parametrizations.weight.original0") or leaf == "weight_g":
                value = 0.8 + 0.4 * torch.rand(p.shape, generator=gen)
            elif leaf == "alpha":
                value = 0.5 + torch.rand(p.shape, generator=gen)
            elif leaf == "gamma":
                value = 0.2 + 0.2 * torch.rand(p.shape, generator=gen)
            elif leaf == "bias":
                value = normal(0.05)
            elif p.ndim == 1:  # norms
                value = 1.0 + normal(0.1)
            elif "embeddings" in name or "codebook" in name:
                value = normal(scale.get("embedding", 1.0))
            else:
                fan_in = math.prod(p.shape[1:]) if p.ndim > 1 else 1
                if ".conv" in name and "ConvTranspose" in type(_owner(module, name)).__name__:
                    fan_in = p.shape[0] * p.shape[2]
                value = normal(scale.get(name.split(".")[0], 1.0) / math.sqrt(fan_in))
            p.copy_(value.to(p.dtype))


def _owner(module: Any, name: str) -> Any:
    parts = name.split(".")
    owner = module
    for part in parts[:-1]:
        if part == "parametrizations":
            break
        owner = getattr(owner, part)
    return owner


# -- tokenizer ----------------------------------------------------------------------------------
def build_tokenizer(cfg: dict[str, Any]) -> Any:
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from tokenizers.models import BPE

    regex = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
             r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
    tok = Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8)))
             for _ in range(600)]
    corpus = ([s for s in _SENTENCES for _ in range(10)]
              + [" ".join(words[i:i + 10]) for i in range(0, 600, 10)])
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(corpus, trainer)
    if tok.get_vocab_size() != BPE_VOCAB:
        raise SystemExit(f"the tiny BPE has {tok.get_vocab_size()} tokens, expected {BPE_VOCAB}")
    pad = cfg["pad_token_id"]
    if pad > BPE_VOCAB:  # real-size ids: unreachable filler entries pad the BPE vocabulary
        model = json.loads(tok.to_str())
        vocab = model["model"]["vocab"]
        vocab.update({f"<|filler:{i}|>": i for i in range(BPE_VOCAB, pad)})
        tok = Tokenizer.from_str(json.dumps(model))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens(cfg)])
    assert tok.token_to_id("<|im_end|>") == cfg["eos_token_id"] and tok.token_to_id("<|endoftext|>") == pad
    assert tok.token_to_id("<|semantic:0|>") == cfg["semantic_begin_id"]
    return tok


def special_tokens(cfg: dict[str, Any]) -> list[str]:
    """The added tokens from ``pad_token_id`` on: endoftext, im_start, im_end, fillers up to the
    real layout's gap (Qwen's other added tokens), pad .. audio_pad, the semantic tokens."""
    gap = cfg["semantic_begin_id"] - cfg["pad_token_id"] - len(SPECIALS)
    if gap < 0 or cfg["eos_token_id"] != cfg["pad_token_id"] + 2:
        raise SystemExit("the config's token ids do not follow the Audio8 layout")
    n = cfg["semantic_end_id"] - cfg["semantic_begin_id"] + 1
    return [*SPECIALS[:3], *(f"<|extra:{i}|>" for i in range(gap)), *SPECIALS[3:],
            *(f"<|semantic:{i}|>" for i in range(n))]


def _tokenizer_files(folder: Path, cfg: dict[str, Any]) -> None:
    tok = build_tokenizer(cfg)
    tok.save(str(folder / "tokenizer.json"))
    extra = special_tokens(cfg)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 131072,
        "clean_up_tokenization_spaces": False, "split_special_tokens": False, "errors": "replace",
        "additional_special_tokens": extra,
    }, indent=2), encoding="utf-8")
    (folder / "special_tokens_map.json").write_text(json.dumps({
        "additional_special_tokens": extra, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
    }, indent=2), encoding="utf-8")


# -- the folder ---------------------------------------------------------------------------------
def write_checkpoint(folder: Path, up: SimpleNamespace, cfg: dict[str, Any], *, seed: int = 0,
                     model_dtype: str = "bfloat16", tokenizer: bool = True) -> Path:
    """Write an upstream-layout checkpoint folder; returns it."""
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    config = up.configuration.ArkttsConfig(**cfg)
    torch.manual_seed(seed)
    model = up.model.ArkttsModel(config)
    randomize(model, seed, scale={"embeddings": 1.0, "fast_output": 3.0})
    with torch.no_grad():
        model.embeddings.weight.mul_(0.25)
        model.embeddings.weight[cfg["eos_token_id"]].mul_(0.9)  # EOS after some frames, not at once
        model.codebook_embeddings.weight.mul_(0.3)
    state = {k: v.detach().to(getattr(torch, model_dtype)).contiguous()
             for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    codec = build_codec(up, cfg)
    randomize(codec, seed + 1)
    with torch.no_grad():  # keep the output below tanh saturation
        codec.decoder.model[-2].conv.parametrizations.weight.original0.mul_(0.15)
    torch.save({k: v.detach().clone() for k, v in codec.state_dict().items()},
               folder / cfg.get("codec_filename", "codec.pth"))
    (folder / "processor_config.json").write_text(json.dumps({
        "audio_sampling_rate": cfg["codec_sample_rate"], "num_codebooks": cfg["num_codebooks"],
        "processor_class": "ArkttsProcessor", "semantic_begin_id": cfg["semantic_begin_id"],
    }, indent=2), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps({
        "do_sample": True, "eos_token_id": cfg["eos_token_id"], "max_new_tokens": 512,
        "pad_token_id": cfg["pad_token_id"], "temperature": 0.7, "top_k": 50, "top_p": 0.9,
    }, indent=2), encoding="utf-8")
    if tokenizer:
        _tokenizer_files(folder, cfg)
    return folder


def load_upstream(folder: Path, up: SimpleNamespace) -> Any:
    """Upstream's model on ``folder`` in float32 (strict load), its codec loaded by ``load_codec``."""
    import torch
    from safetensors.torch import load_file

    patch_codec_class(up)
    config = up.configuration.ArkttsConfig.from_pretrained(str(folder))
    config._name_or_path = str(folder)
    model = up.model.ArkttsModel(config).eval()
    state = {k: v.to(torch.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}
    model.load_state_dict(state, strict=True)
    model.load_codec(device="cpu")
    return model


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Write an Audio8 TTS checkpoint in the upstream layout.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", choices=["tiny", "real"], default="tiny")
    parser.add_argument("--upstream", type=Path, default=DEFAULT_UPSTREAM)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_checkpoint(args.out, upstream_modules(args.upstream),
                     TINY if args.size == "tiny" else {**REAL, **REAL_CODEC}, seed=args.seed)
    print(args.out)


if __name__ == "__main__":
    main()
