"""Text tokenization and prefill-sequence building (upstream ``mask_multichar_chinese_tokens``,
``_make_ref_prefix`` and the four prompt layouts of ``_generate_with_prompt_cache``).

Tokenizer: ``tokenizer.json`` through ``tokenizers``, as upstream's ``LlamaTokenizerFast`` +
wrapper uses it: ``tokenize`` (no BOS/EOS), then every token that, with ``▁`` removed, is a
vocabulary entry of two or more CJK characters (``\\u4e00-\\u9fff``) is split into single
characters (the ``▁`` is dropped), then ids by vocabulary lookup (unknown -> ``<unk>``).

transformers 4.x tokenizes with ``tokenizer.json`` as written; 5.x rebuilds the pipeline as
``Metaspace(prepend_scheme="first")``, which differs only when the text starts with a space
(5.x treats that first space as the prepended ``▁``) or contains literal special tokens. We drop
one leading space, which reproduces 5.x exactly and 4.x on every text that does not start with
a space (the session collapses whitespace runs first, as upstream's ``VoxCPM.generate`` does).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .config import AUDIO_START_TOKEN, REF_AUDIO_END_TOKEN, REF_AUDIO_START_TOKEN
from .generate import PrefillSequence

SPACE_PIECE = "\u2581"


def _is_cjk(token: str) -> bool:
    return len(token) >= 2 and all("\u4e00" <= c <= "\u9fff" for c in token)


class VoxCPMTokenizer:
    def __init__(self, tokenizer) -> None:  # tokenizers.Tokenizer
        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self.multichar = {tok for tok in vocab if _is_cjk(tok)}
        unk = tokenizer.token_to_id("<unk>")
        self.unk_id = 0 if unk is None else unk

    @classmethod
    def from_file(cls, path: str | Path) -> VoxCPMTokenizer:
        from audiocpp.engine.tokenizer import load_tokenizer

        return cls(load_tokenizer(path))

    def tokenize(self, text: str) -> list[str]:
        if text.startswith(" "):
            text = text[1:]
        pieces = self.tokenizer.encode(text, add_special_tokens=False).tokens
        out: list[str] = []
        for piece in pieces:
            clean = piece.replace(SPACE_PIECE, "")
            if clean in self.multichar:
                out.extend(clean)
            else:
                out.append(piece)
        return out

    def __call__(self, text: str) -> list[int]:
        ids = []
        for piece in self.tokenize(text):
            i = self.tokenizer.token_to_id(piece)
            ids.append(self.unk_id if i is None else i)
        return ids


def normalize_text(text: str) -> str:
    """What ``VoxCPM.generate`` does to the text: newlines to spaces, whitespace runs collapsed."""
    return re.sub(r"\s+", " ", text.replace("\n", " "))


def design_text(text: str, instruct: str | None) -> str:
    """Voice design: upstream reads a ``(style description)`` prefix of the text."""
    if instruct:
        return f"({instruct.strip()}){text}"
    return text


def encode_prompt_audio(vae, samples: torch.Tensor, patch_size: int, padding: str) -> torch.Tensor:
    """Upstream ``_encode_wav`` after loading: pad to whole patches (``left`` for continuation
    prompts, ``right`` for references), VAE-encode, and cut into ``(T, P, D)`` latent patches.
    ``samples`` is mono float32 at the VAE's encode rate; the patches come back on the CPU (the
    prompt is assembled there and moved to the generator's device)."""
    device = next(vae.parameters()).device
    audio = samples.reshape(1, -1).to(device=device, dtype=torch.float32)
    patch_len = patch_size * vae.chunk_size
    rest = audio.shape[1] % patch_len
    if rest:
        pad = patch_len - rest
        audio = torch.nn.functional.pad(audio, (pad, 0) if padding == "left" else (0, pad))
    feat = vae.encode(audio)
    return feat.reshape(vae.latent_dim, -1, patch_size).permute(1, 2, 0).contiguous().cpu()


class PromptLayoutBuilder:
    """Builds the prefill sequence for zero-shot, reference, continuation and both."""

    def __init__(self, tokenizer: VoxCPMTokenizer, patch_size: int, latent_dim: int, *,
                 reference_prefix: bool = True) -> None:
        self.tokenizer = tokenizer
        self.patch_size = patch_size
        self.latent_dim = latent_dim
        self.reference_prefix = reference_prefix

    def _zeros(self, n: int) -> torch.Tensor:
        return torch.zeros((n, self.patch_size, self.latent_dim), dtype=torch.float32)

    def build(self, text: str, *, reference: torch.Tensor | None = None,
              prompt_feats: torch.Tensor | None = None, prompt_text: str | None = None) -> PrefillSequence:
        """``reference`` / ``prompt_feats`` are ``(T, P, D)`` latents; ``prompt_text`` goes with
        ``prompt_feats``."""
        if (prompt_feats is None) != (prompt_text is None):
            raise ValueError("prompt audio and prompt text go together")
        if reference is not None and not self.reference_prefix:
            raise ValueError("this model has no isolated reference prompt (VoxCPM1): "
                             "use a continuation prompt")
        full = (prompt_text + text) if prompt_text is not None else text
        ids = self.tokenizer(full) + [AUDIO_START_TOKEN]
        n_text = len(ids)
        tokens = [torch.tensor(ids, dtype=torch.int64)]
        text_mask = [torch.ones(n_text, dtype=torch.int64)]
        audio_mask = [torch.zeros(n_text, dtype=torch.int64)]
        feats = [self._zeros(n_text)]
        if reference is not None:
            n_ref = reference.shape[0]
            tokens.insert(0, torch.tensor([REF_AUDIO_START_TOKEN] + [0] * n_ref + [REF_AUDIO_END_TOKEN]))
            text_mask.insert(0, torch.tensor([1] + [0] * n_ref + [1]))
            audio_mask.insert(0, torch.tensor([0] + [1] * n_ref + [0]))
            feats.insert(0, torch.cat([self._zeros(1), reference.to(torch.float32), self._zeros(1)]))
        if prompt_feats is not None:
            n_prompt = prompt_feats.shape[0]
            tokens.append(torch.zeros(n_prompt, dtype=torch.int64))
            text_mask.append(torch.zeros(n_prompt, dtype=torch.int64))
            audio_mask.append(torch.ones(n_prompt, dtype=torch.int64))
            feats.append(prompt_feats.to(torch.float32))
        mode = {(False, False): "zero_shot", (True, False): "reference", (False, True): "continuation",
                (True, True): "ref_continuation"}[(reference is not None, prompt_feats is not None)]
        return PrefillSequence(
            tokens=torch.cat(tokens).to(torch.int64),
            text_mask=torch.cat(text_mask).to(torch.int64),
            audio_mask=torch.cat(audio_mask).to(torch.int64),
            feats=torch.cat(feats),
            target_length=len(self.tokenizer(text)),
            mode=mode,
        )
