"""A tiny Llama-style BPE tokenizer in the layout of the VoxCPM tokenizers (reference section 3).

ids 0-2 ``<unk> <s> </s>``, 3-100 reserved, 101-104 the audio specials, then the 256 byte
tokens ``<0x00>..<0xFF>`` (byte fallback), then the trained pieces and merges, which include
multi-character Chinese tokens (so the upstream single-character split rule is exercised).
Normalizer ``Prepend("▁") + Replace(" ", "▁")``, no pre-tokenizer, as the real tokenizer.json.
"""

from __future__ import annotations

import json
from pathlib import Path

SPACE = "\u2581"
SPECIALS = ["<unk>", "<s>", "</s>"] + [f"<reserved_{i}>" for i in range(3, 101)] + [
    "<|audio_start|>", "<|audio_end|>", "<|ref_audio_start|>", "<|ref_audio_end|>",
]

CORPUS = [
    "Hello world. This is a tiny test of the speech model.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps.",
    "Voice cloning copies a voice from a short reference recording.",
    "A calm and warm voice reads the news slowly and clearly.",
    "你好世界。今天天气很好，我们一起去公园散步吧。",
    "语音合成模型可以模仿说话人的声音。你好你好世界世界。",
    "中文和英文混合的句子 mixed with English words 你好。",
    "Numbers like 1234 and symbols like % or & also appear.",
]


def build_tokenizer(vocab_size: int = 550):
    """Train the tokenizer; returns a ``tokenizers.Tokenizer``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    trained_size = vocab_size - len(SPECIALS) - 256
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE),
                                                   normalizers.Replace(" ", SPACE)])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never",
                                                         split=True)
    trainer = trainers.BpeTrainer(vocab_size=trained_size, show_progress=False, special_tokens=[])
    trainer_tok.train_from_iterator(CORPUS * 4, trainer)
    data = json.loads(trainer_tok.to_str())
    pieces = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]]

    vocab: dict[str, int] = {}
    for name in SPECIALS:
        vocab[name] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in pieces:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    if len(vocab) > vocab_size:
        raise RuntimeError(f"tokenizer vocab {len(vocab)} exceeds {vocab_size}")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tok.decoder = decoders.Sequence([
        decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    specials = ["<unk>", "<s>", "</s>", "<|audio_start|>", "<|audio_end|>", "<|ref_audio_start|>",
                "<|ref_audio_end|>"]
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    return tok


def write_tokenizer(out_dir: Path, vocab_size: int = 550) -> None:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``."""
    tok = build_tokenizer(vocab_size)
    tok.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "LlamaTokenizerFast",
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1000000000000000019884624838656,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2), encoding="utf-8")
