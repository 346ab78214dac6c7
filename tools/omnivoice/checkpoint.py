#!/usr/bin/env python3
"""Build a random-weight OmniVoice checkpoint in the k2-fsa/OmniVoice layout with upstream's
own classes. Runs in the reference env (``.ref-envs/omnivoice``, see
``tools/reference_envs/omnivoice.sh``).

``--size tiny``: a 2-layer Qwen3 (hidden 64) and a
codec with the real geometry (hop 960, 25 fps, 8 quantizers) but tiny widths. ``--size
full`` uses Qwen3-0.6B dims and the full-size codec (for the benchmark).

Usage: python tools/omnivoice/checkpoint.py OUT_DIR [--size tiny|full] [--seed 0]
Prints one JSON line (sizes, ids) last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _tiny_tokenizer_module():
    """``families/omnivoice/tiny_tokenizer.py`` (stdlib + tokenizers only), loaded by path: this
    script runs in the reference env, where audiocpp (which the family package imports) is absent."""
    path = REPO / "families" / "omnivoice" / "tiny_tokenizer.py"
    spec = importlib.util.spec_from_file_location("omnivoice_tiny_tokenizer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_text_tokenizer(out: Path):
    from transformers import Qwen2Tokenizer

    tt = _tiny_tokenizer_module()
    vocab, merges = tt.vocab_and_merges(tt.train_bpe())
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>",
                                                          *tt.OMNIVOICE_SPECIAL_TOKENS]})
    tok.save_pretrained(out)
    return tok


def _normal_(t: torch.Tensor, std: float, gen: torch.Generator) -> None:
    t.copy_(torch.randn(t.shape, generator=gen) * std)


def build_lm(tok, size: str, gen: torch.Generator):
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig
    from transformers import Qwen3Config

    if size == "tiny":
        llm = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                          max_position_embeddings=4096, rms_norm_eps=1e-6,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                          tie_word_embeddings=True)
    else:
        llm = Qwen3Config(vocab_size=151676, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                          num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                          max_position_embeddings=40960, rms_norm_eps=1e-6,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                          tie_word_embeddings=True)
    cfg = OmniVoiceConfig(audio_vocab_size=1025, audio_mask_id=1024, num_audio_codebook=8, llm_config=llm)
    model = OmniVoice(cfg).to(torch.float32).eval()
    with torch.no_grad():
        for p in model.parameters():
            if size == "tiny":
                if p.dim() >= 2:
                    _normal_(p, 0.2, gen)
                else:  # RMSNorm scales: keep them near one but not equal, so a mix-up shows
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                _normal_(p, 0.02, gen)
    return model


def build_codec(size: str, gen: torch.Generator):
    from transformers import DacFeatureExtractor, HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel

    if size == "tiny":
        cfg = HiggsAudioV2TokenizerConfig(
            target_bandwidths=[0.5, 1, 1.5, 2], codebook_dim=8,
            acoustic_model_config={"model_type": "dac", "encoder_hidden_size": 4, "decoder_hidden_size": 64,
                                   "hidden_size": 16, "downsampling_ratios": [8, 5, 4, 2, 3],
                                   "upsampling_ratios": [8, 5, 4, 2, 3]},
            semantic_model_config={"model_type": "hubert", "hidden_size": 32, "num_hidden_layers": 2,
                                   "num_attention_heads": 2, "intermediate_size": 64, "conv_dim": [16] * 7,
                                   "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
                                   "conv_stride": [5, 2, 2, 2, 2, 2, 2],
                                   "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4,
                                   "mask_time_prob": 0.0})
    else:
        cfg = HiggsAudioV2TokenizerConfig(
            target_bandwidths=[0.5, 1, 1.5, 2], codebook_dim=64,
            acoustic_model_config={"model_type": "dac", "encoder_hidden_size": 64,
                                   "decoder_hidden_size": 1024,
                                   "hidden_size": 256, "downsampling_ratios": [8, 5, 4, 2, 3],
                                   "upsampling_ratios": [8, 5, 4, 2, 3]},
            semantic_model_config={"model_type": "hubert", "mask_time_prob": 0.0})
    codec = HiggsAudioV2TokenizerModel(cfg).to(torch.float32).eval()
    with torch.no_grad():
        for name, p in codec.named_parameters():
            if name.endswith("alpha"):  # Snake
                p.copy_(1.0 + 0.5 * torch.rand(p.shape, generator=gen))
            elif name.endswith("original0"):  # weight-norm g of the HuBERT positional conv
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                fan_in = p.shape[1] * (p.shape[2] if p.dim() > 2 else 1)
                if "conv_t1" in name:  # ConvTranspose1d weight is (in, out, k)
                    fan_in = p.shape[0] * p.shape[2]
                _normal_(p, 1.0 / math.sqrt(fan_in), gen)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
        cb_gen = torch.Generator().manual_seed(1234)
        for q in codec.quantizer.quantizers:
            q.codebook.embed.copy_(torch.randn(q.codebook.embed.shape, generator=cb_gen))
            q.codebook.embed_avg.copy_(q.codebook.embed)
            q.codebook.cluster_size.fill_(1.0)
    fe = DacFeatureExtractor(feature_size=1, sampling_rate=24000, hop_length=960)
    return codec, fe


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", choices=("tiny", "full"), default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    tok = build_text_tokenizer(out)
    model = build_lm(tok, args.size, gen)
    model.save_pretrained(out)
    codec, fe = build_codec(args.size, gen)
    codec.save_pretrained(out / "audio_tokenizer")
    fe.save_pretrained(out / "audio_tokenizer")
    specials = {t: tok.convert_tokens_to_ids(t) for t in ("<|denoise|>", "<|text_end|>", "<|endoftext|>")}
    print(json.dumps({"out": str(out), "size": args.size, "vocab": len(tok), "specials": specials,
                      "lm_params": sum(p.numel() for p in model.parameters()),
                      "codec_params": sum(p.numel() for p in codec.parameters())}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
