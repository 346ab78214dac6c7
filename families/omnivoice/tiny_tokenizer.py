"""A tiny Qwen2-style byte-level BPE tokenizer for test and demo checkpoints.

Same pipeline as ``Qwen2Tokenizer`` (NFC, the Qwen2 split regex isolated, ByteLevel without
its own regex, ByteLevel decoder), trained deterministically on a fixed corpus plus seeded
pseudo-words. Used by the demo checkpoint (``demo.py``) and by the reference-side tiny
checkpoint builder (``tools/omnivoice/checkpoint.py``, which loads this file by path), so
only ``tokenizers`` and the standard library are imported here.
"""

from __future__ import annotations

import json
import random

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE

#: ``transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX``.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
#: The tokens OmniVoice adds to the Qwen tokenizer, in its order.
OMNIVOICE_SPECIAL_TOKENS = (
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
)
#: Qwen's own specials, before OmniVoice's (``<|endoftext|>`` is unk/eos/pad).
QWEN_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

_SENTENCES = (
    "Nice to meet you. Hello world. This is a test.",
    "The quick brown fox jumps over the lazy dog, again and again!",
    "Do you hear me? Yes, I can hear you very well; thank you.",
    "It's a sunny day, isn't it? We'll go out and they'd come too.",
    "Numbers like 1, 2, 3, 42 and 2024 appear in text as well.",
    "None English Chinese French German Spanish Japanese Korean",
    "female, male, low pitch, high pitch, british accent, american accent, whisper",
    "你好，世界。今天天气很好，我们一起去公园吧！",
    "这是一个测试。男，女，河南话，四川话，低音调，高音调。",
    "[laughter] [sigh] [question-en] [surprise-ah] [confirmation-en]",
)


def corpus(seed: int = 0, num_words: int = 4000) -> list[str]:
    """A fixed corpus: a few sentences (repeated) and ``num_words`` seeded pseudo-words."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(num_words)]
    lines = [s for s in _SENTENCES for _ in range(20)]
    lines += [" ".join(words[i:i + 12]) for i in range(0, num_words, 12)]
    return lines


def _pipeline(tokenizer: Tokenizer) -> Tokenizer:
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_bpe(vocab_size: int = 1090, seed: int = 0) -> Tokenizer:
    """The BPE model alone (no added tokens); deterministic for a given ``seed``."""
    tokenizer = _pipeline(Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="",
                                        end_of_word_suffix="", fuse_unk=False, byte_fallback=False)))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tokenizer.train_from_iterator(corpus(seed), trainer)
    return tokenizer


def vocab_and_merges(tokenizer: Tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The BPE vocab and merges (as pairs), e.g. to build a ``Qwen2Tokenizer``."""
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return dict(model["vocab"]), merges  # type: ignore[return-value]


def build_tokenizer(vocab_size: int = 1090, seed: int = 0) -> Tokenizer:
    """The trained BPE plus Qwen's and OmniVoice's special tokens (ids after the vocab)."""
    tokenizer = train_bpe(vocab_size, seed)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t in (*QWEN_SPECIAL_TOKENS, *OMNIVOICE_SPECIAL_TOKENS)])
    return tokenizer
