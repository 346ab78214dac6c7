"""Tiny tokenizers in the two real layouts, trained here (no downloads).

The pipelines are written out as transformers builds them (``Qwen2Tokenizer`` and the legacy
``LlamaConverter``), independently of ``audiocpp.engine.tokenizer``, so the tests compare the
engine's rebuilt tokenizers against an outside definition.
"""

from __future__ import annotations

import json
from pathlib import Path

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

QWEN2_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
OMNIVOICE_SPECIALS = ["<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>",
                      "<|instruct_end|>", "<|text_start|>", "<|text_end|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_PLAIN_ADDED = ["<think>", "</think>"]  # added, not special (as in Qwen3)
AUDIO_SPECIALS = ["<|audio_start|>", "<|audio_end|>", "<|ref_audio_start|>", "<|ref_audio_end|>"]

TRAIN_TEXT = [
    "Hello world. This is a test of the tiny tokenizer, isn't it? We'll see, they'd say.",
    "The quick brown fox jumps over the lazy dog; numbers 1234 and 56.78 appear too!",
    "   Leading spaces, trailing spaces   and\tmultiple   spaces\n\nnew lines\r\nhere.",
    "你好，世界。今天天气很好，我们一起去公园吧！这是一个测试。",
    "Ceci est une phrase en français: élève, garçon, naïve. Straße und Größe.",
    "Emoji 😀🎉 and symbols © ® ™ — “quotes” ‘single’ … ellipsis.",
]
CORPUS = [
    "Hello world.",
    "Hello   world.",
    "  leading two spaces",
    "trailing spaces   ",
    " a",
    "line one\nline two\n\n  indented\r\nwindows",
    "tabs\tand\t\ttabs",
    "It's 2024: we'll pay $3.50, they'd say — OK?",
    "你好世界，今天天气很好。",
    "混合 mixed 文本 text 123",
    "emoji 😀🎉🚀 and a rare one 🦜",
    "Straße naïve garçon ÉLÈVE",
    "e\u0301 composed vs é",  # NFC matters for qwen2
    "<|text_start|>Hello<|text_end|>",
    "<|lang_start|>en<|lang_end|><|instruct_start|>female, low pitch<|instruct_end|>"
    "<|text_start|>你好<|text_end|>",
    "before<|endoftext|>after <|im_start|> x <|im_end|>",
    "<think>plan</think> answer",
    "<|audio_start|>",
    "text then<|audio_start|>",
    "<s>literal specials</s> and <unk>",
    "",
    " ",
    "\n",
    "ünïcödé ✓ ½ ∑ 𝔘",
]


def _lines(repeat: int = 30) -> list[str]:
    return [line for line in TRAIN_TEXT for _ in range(repeat)]


def build_qwen2(folder: Path, vocab_size: int = 600) -> Path:
    """A Qwen2-layout tokenizer folder: tokenizer.json (+ tokenizer_config.json)."""
    tok = Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(_lines(), trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIALS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_PLAIN_ADDED])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in OMNIVOICE_SPECIALS])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "bos_token": None, "model_max_length": 32768,
    }), encoding="utf-8")
    return folder


def build_llama(folder: Path, vocab_size: int = 550) -> Path:
    """A VoxCPM/Llama-layout tokenizer folder: <unk> <s> </s> at 0-2, reserved 3-100, audio
    specials 101-104, then the 256 <0xXX> byte tokens, then the trained pieces."""
    trainer_tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 361, show_progress=False, special_tokens=[])
    trainer_tok.train_from_iterator(_lines(), trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    head = ["<unk>", "<s>", "</s>"] + [f"<reserved_{i}>" for i in range(3, 101)] + AUDIO_SPECIALS
    head += [f"<0x{b:02X}>" for b in range(256)]
    vocab = {t: i for i, t in enumerate(head)}
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in trained["merges"]]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True,
                        dropout=None))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    tok.post_processor = processors.TemplateProcessing(single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ["<unk>", "<s>", "</s>", *AUDIO_SPECIALS]])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "legacy": True,
    }), encoding="utf-8")
    (folder / "special_tokens_map.json").write_text(json.dumps({
        "bos_token": {"content": "<s>"}, "eos_token": {"content": "</s>"}, "unk_token": {"content": "<unk>"},
    }), encoding="utf-8")
    return folder
