"""Text tokenizers: ``tokenizers.Tokenizer`` from a tokenizer.json or from GGUF metadata.

Two BPE styles cover the families:

- ``"qwen2"`` (OmniVoice, Audio8 TTS): byte-level BPE as ``Qwen2Tokenizer`` builds it: NFC,
  ``Split(Qwen2 regex, isolated)`` + ``ByteLevel(use_regex=False)``, ByteLevel decoder.
  omnivoice.cpp's GGUF stores ``tokenizer.ggml.{model="gpt2", tokens, merges}`` only (no
  token types): added tokens are recognised as the tokens no merge produces, and the
  caller may name the special ones (``special_tokens``), as omnivoice.cpp does.
- ``"llama_bpe"`` (VoxCPM): SentencePiece-style BPE as transformers' ``LlamaConverter``
  writes it in legacy mode: normalizer ``Prepend("▁")`` + ``Replace(" ", "▁")``, no
  pre-tokenizer, ``byte_fallback`` with ``<0xXX>`` tokens, ``unk`` fused, decoders
  ``Replace("▁", " ")``, ``ByteFallback``, ``Fuse``, ``Strip(" ", 1, 0)``. VoxCPM.cpp's
  GGUF adds ``token_type`` (CONTROL = added), bos/eos/unk ids and ``pre="default"``, and
  pads the token list to the model's vocab size with ``[PAD<i>]`` (UNUSED) tokens.

Merges come in two encodings: ``"a b"`` strings (llama.cpp's form; omnivoice.cpp joins
list-form merges into it) and ``["a", "b"]`` pairs, which is how ``tokenizers`` >= 0.20 saves
``tokenizer.json`` and what VoxCPM.cpp's converter copies through verbatim (gguf-py then
writes a GGUF array of string arrays). :func:`merge_pairs` reads both.

``gguf_tokenizer_metadata`` writes those keys the way the two converters do, so families
can build test GGUFs in either layout; ``add_to_gguf_writer`` puts them in a gguf-py writer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

from .errors import ModelError, UsageError

#: ``transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX``.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
STYLES = ("qwen2", "llama_bpe")
SPIECE_UNDERLINE = "▁"
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-F]{2}>$")

# gguf.TokenType values (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

K_MODEL = "tokenizer.ggml.model"
K_PRE = "tokenizer.ggml.pre"
K_TOKENS = "tokenizer.ggml.tokens"
K_TYPES = "tokenizer.ggml.token_type"
K_MERGES = "tokenizer.ggml.merges"
K_BOS = "tokenizer.ggml.bos_token_id"
K_EOS = "tokenizer.ggml.eos_token_id"
K_UNK = "tokenizer.ggml.unknown_token_id"
K_ADD_BOS = "tokenizer.ggml.add_bos_token"
K_ADD_EOS = "tokenizer.ggml.add_eos_token"


_GGUF_HINT = "the GGUF's tokenizer keys are damaged; convert the model again"


def _check_style(style: str) -> None:
    if style not in STYLES:
        raise UsageError(f"unknown tokenizer style {style!r}", hint=f"use one of {', '.join(STYLES)}")


# -- tokenizer.json ---------------------------------------------------------------------------
def tokenizer_json_path(path: str | Path) -> Path:
    path = Path(path).expanduser()
    target = path / "tokenizer.json" if path.is_dir() else path
    if not target.is_file():
        where = f"{path} holds no tokenizer.json" if path.is_dir() else f"{path} does not exist"
        raise ModelError(f"cannot load the tokenizer: {where}",
                         hint="pass the model folder (with tokenizer.json) or the tokenizer.json file")
    return target


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of a ``tokenizer.json`` (a file, or a folder holding one), added and
    special tokens as the file declares them."""
    target = tokenizer_json_path(path)
    try:
        return Tokenizer.from_file(str(target))
    except Exception as exc:  # tokenizers raises a bare Exception for malformed files
        raise ModelError(f"{target} is not a valid tokenizer.json: {exc}",
                         hint="the file must be a Hugging Face `tokenizers` JSON file") from None


# -- the two pipelines ------------------------------------------------------------------------
def qwen2_pipeline(tokenizer: Tokenizer) -> Tokenizer:
    """Set Qwen2's normalizer, pre-tokenizer, decoder and post-processor on ``tokenizer``."""
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def llama_bpe_pipeline(tokenizer: Tokenizer) -> Tokenizer:
    """Set the legacy Llama (SentencePiece BPE) normalizer and decoders on ``tokenizer``."""
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.Prepend(SPIECE_UNDERLINE), normalizers.Replace(" ", SPIECE_UNDERLINE),
    ])
    tokenizer.pre_tokenizer = None
    tokenizer.decoder = decoders.Sequence([
        decoders.Replace(SPIECE_UNDERLINE, " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0),
    ])
    return tokenizer


def bpe_model(style: str, vocab: dict[str, int], merges: list[tuple[str, str]],
              unk_token: str | None = None) -> BPE:
    _check_style(style)
    if style == "qwen2":
        return BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                   end_of_word_suffix="", fuse_unk=False, byte_fallback=False)
    return BPE(vocab=vocab, merges=merges, dropout=None, unk_token=unk_token, fuse_unk=True,
               byte_fallback=True)


# -- GGUF -> tokenizer ------------------------------------------------------------------------
def _strings(metadata: Mapping[str, Any], key: str) -> list[str]:
    value = metadata.get(key)
    if value is None:
        raise ModelError(f"the GGUF has no {key}", hint="this GGUF carries no BPE tokenizer")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ModelError(f"the GGUF's {key} is not a string array")
    return value


def merge_pairs(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``tokenizer.ggml.merges`` as pairs; each entry is a ``"a b"`` string or a pair of
    strings (a GGUF array of two-string arrays)."""
    value = metadata.get(K_MERGES)
    if value is None:
        raise ModelError(f"the GGUF has no {K_MERGES}", hint="this GGUF carries no BPE tokenizer")
    if not isinstance(value, list):
        raise ModelError(f"the GGUF's {K_MERGES} is not an array")
    pairs = []
    for m in value:
        if isinstance(m, str):
            pairs.append(split_merge(m))
        elif isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(p, str) for p in m):
            pairs.append((m[0], m[1]))
        else:
            raise ModelError(f"the GGUF's {K_MERGES} holds {m!r}, neither a \"a b\" string nor a pair of "
                             "strings",
                             hint="merges are an array of \"a b\" strings or of two-string arrays")
    return pairs


def split_merge(merge: str) -> tuple[str, str]:
    """``"a b"`` -> ``("a", "b")``, split at the first space after the first character
    (llama.cpp's rule, so a token starting with a space survives)."""
    pos = merge.find(" ", 1)
    if pos < 0:
        raise ModelError(f"GGUF merge {merge!r} is not two tokens separated by a space")
    return merge[:pos], merge[pos + 1:]


def _int(metadata: Mapping[str, Any], key: str) -> int | None:
    value = metadata.get(key)
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise ModelError(f"the GGUF's {key} is {str(value)[:40]!r}, not an integer", hint=_GGUF_HINT)


def _flag(metadata: Mapping[str, Any], key: str) -> bool:
    value = metadata.get(key)
    if value is None:
        return False
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise ModelError(f"the GGUF's {key} is {str(value)[:40]!r}, not a boolean", hint=_GGUF_HINT)


def _token_types(metadata: Mapping[str, Any], count: int) -> list[int] | None:
    raw = metadata.get(K_TYPES)
    if raw is None:
        return None
    if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu" and raw.ndim == 1:
        types = raw.tolist()
    elif isinstance(raw, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
        types = raw
    else:
        raise ModelError(f"the GGUF's {K_TYPES} is not an integer array", hint=_GGUF_HINT)
    if len(types) != count:
        raise ModelError(f"the GGUF has {len(types)} token types for {count} tokens", hint=_GGUF_HINT)
    return types


def tokenizer_from_gguf(metadata: Mapping[str, Any], style: str,
                        special_tokens: Iterable[str] | None = None) -> Tokenizer:
    """Rebuild a BPE tokenizer from GGUF ``tokenizer.ggml.*`` keys (see the module docstring).

    Added tokens are those typed CONTROL (special) or USER_DEFINED (not special); without
    ``token_type`` they are the tokens no merge produces, special when listed in
    ``special_tokens`` (all of them when that is None). Empty and UNUSED tokens are gaps.
    """
    _check_style(style)
    model = metadata.get(K_MODEL)
    if not isinstance(model, str) or model != "gpt2":
        raise ModelError(f"the GGUF tokenizer model is {str(model)[:40]!r}; only BPE ('gpt2') tokenizers "
                         "are supported",
                         hint="SentencePiece-unigram ('llama' with scores) GGUF tokenizers are not rebuilt "
                         "here")
    tokens = _strings(metadata, K_TOKENS)
    pairs = merge_pairs(metadata)
    types = _token_types(metadata, len(tokens))

    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok == "" or (types is not None and types[i] == UNUSED):
            continue
        vocab.setdefault(tok, i)
    added: list[AddedToken] = []
    if types is not None:
        for i, tok in enumerate(tokens):
            if types[i] in (CONTROL, USER_DEFINED) and vocab.get(tok) == i:
                added.append(AddedToken(tok, special=types[i] == CONTROL, normalized=False))
    else:
        wanted = None if special_tokens is None else set(special_tokens)
        missing = sorted((wanted or set()) - set(vocab))
        if missing:
            raise ModelError(f"special token(s) {', '.join(missing)} are not in the GGUF's token list")
        produced = {a + b for a, b in pairs}
        for tok in sorted(vocab, key=vocab.__getitem__):
            base = len(tok) == 1 or tok in produced or (style == "llama_bpe" and _BYTE_TOKEN.match(tok))
            if not base or (wanted is not None and tok in wanted):
                added.append(AddedToken(tok, special=wanted is None or tok in wanted, normalized=False))

    unk_token = None
    unk_id = _int(metadata, K_UNK)
    if style == "llama_bpe" and unk_id is not None and 0 <= unk_id < len(tokens) and tokens[unk_id] in vocab:
        unk_token = tokens[unk_id]
    try:
        tokenizer = Tokenizer(bpe_model(style, vocab, pairs, unk_token))
    except Exception as exc:
        raise ModelError(f"the GGUF tokenizer cannot be rebuilt: {exc}") from None
    (qwen2_pipeline if style == "qwen2" else llama_bpe_pipeline)(tokenizer)
    if added:
        tokenizer.add_tokens(added)
    _template(tokenizer, metadata, tokens)
    return tokenizer


def _template(tokenizer: Tokenizer, metadata: Mapping[str, Any], tokens: list[str]) -> None:
    """BOS/EOS insertion when the GGUF asks for it (``add_bos_token`` / ``add_eos_token``)."""
    single: list[str] = []
    specials: dict[str, int] = {}
    for flag, key, place in ((K_ADD_BOS, K_BOS, 0), (K_ADD_EOS, K_EOS, 1)):
        tid = _int(metadata, key)
        if _flag(metadata, flag) and tid is not None and 0 <= tid < len(tokens):
            single.insert(len(single) if place else 0, f"{tokens[tid]}:0")
            specials[tokens[tid]] = tid
        if place == 0:
            single.append("$A:0")
    if specials:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=" ".join(single), special_tokens=list(specials.items()))


# -- tokenizer -> GGUF ------------------------------------------------------------------------
def _special_names(folder: Path | None) -> dict[str, str]:
    """bos/eos/unk token strings from tokenizer_config.json / special_tokens_map.json."""
    out: dict[str, str] = {}
    if folder is None:
        return out
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        for role in ("bos", "eos", "unk"):
            value = data.get(f"{role}_token")
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and role not in out:
                out[role] = value
    return out


def gguf_tokenizer_metadata(tokenizer: Tokenizer | str | Path, style: str, *,
                            vocab_size: int | None = None, merges: str = "strings") -> dict[str, Any]:
    """``tokenizer.ggml.*`` keys for ``tokenizer`` (a Tokenizer, a tokenizer.json or a folder),
    laid out as omnivoice.cpp (``qwen2``) or VoxCPM.cpp (``llama_bpe``) write them.

    ``qwen2``: ``model``, ``tokens`` (model vocab by id, added tokens overriding, gaps ""),
    ``merges`` ("a b"). ``llama_bpe``: also ``pre="default"``, ``token_type`` (CONTROL for
    added tokens, UNUSED for ``[PAD<i>]`` padding up to ``vocab_size``), and bos/eos/unk ids
    (from the folder's tokenizer_config.json / special_tokens_map.json, else ``<s>``,
    ``</s>``, ``<unk>``; 0 when absent, as VoxCPM.cpp writes).

    ``merges``: ``"strings"`` (``"a b"``, what omnivoice.cpp always writes) or ``"pairs"``
    (``["a", "b"]``, what VoxCPM.cpp copies through from a ``tokenizer.json`` that
    ``tokenizers`` >= 0.20 saved).
    """
    _check_style(style)
    if merges not in ("strings", "pairs"):
        raise UsageError(f"unknown merge encoding {merges!r}", hint="use 'strings' or 'pairs'")
    folder = None
    if not isinstance(tokenizer, Tokenizer):
        path = tokenizer_json_path(tokenizer)
        folder = path.parent
        tokenizer = load_tokenizer(path)
    data = json.loads(tokenizer.to_str())
    model = data.get("model", {})
    if model.get("type") != "BPE":
        raise ModelError(f"expected a BPE tokenizer, got {model.get('type')!r}")
    vocab: dict[str, int] = model.get("vocab", {})
    added = data.get("added_tokens", [])
    raw_merges = model.get("merges", [])
    if merges == "strings":
        merge_list: list[Any] = [m if isinstance(m, str) else " ".join(m) for m in raw_merges]
    else:
        merge_list = [list(split_merge(m)) if isinstance(m, str) else list(m) for m in raw_merges]
    if style == "qwen2":
        size = max([*vocab.values(), *(a["id"] for a in added), -1]) + 1
        tokens = [""] * size
        for tok, i in vocab.items():
            tokens[i] = tok
        for a in added:
            tokens[a["id"]] = a["content"]
        return {K_MODEL: "gpt2", K_TOKENS: tokens, K_MERGES: merge_list}

    full = tokenizer.get_vocab(with_added_tokens=True)
    by_id = {i: tok for tok, i in full.items()}
    added_names = {a["content"] for a in added}
    size = vocab_size if vocab_size is not None else max(by_id, default=-1) + 1
    if by_id and max(by_id) >= size:
        raise UsageError(f"vocab_size {size} is smaller than the tokenizer's largest id {max(by_id)}")
    tokens, types = [], []
    for i in range(size):
        tok = by_id.get(i)
        if tok is None:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
        else:
            tokens.append(tok)
            types.append(CONTROL if tok in added_names else NORMAL)
    names = _special_names(folder)
    ids = {}
    for role, default in (("bos", "<s>"), ("eos", "</s>"), ("unk", "<unk>")):
        ids[role] = full.get(names.get(role, default), 0)
    return {
        K_MODEL: "gpt2", K_PRE: "default", K_TOKENS: tokens, K_TYPES: types, K_MERGES: merge_list,
        K_BOS: ids["bos"], K_EOS: ids["eos"], K_UNK: ids["unk"],
    }


def add_to_gguf_writer(writer: Any, metadata: Mapping[str, Any]) -> None:
    """Write ``tokenizer.ggml.*`` keys into a ``gguf.GGUFWriter`` with llama.cpp's types."""
    setters = {
        K_MODEL: writer.add_tokenizer_model, K_PRE: writer.add_tokenizer_pre,
        K_TOKENS: writer.add_token_list, K_TYPES: writer.add_token_types,
        K_MERGES: writer.add_token_merges, K_BOS: writer.add_bos_token_id,
        K_EOS: writer.add_eos_token_id, K_UNK: writer.add_unk_token_id,
        K_ADD_BOS: writer.add_add_bos_token, K_ADD_EOS: writer.add_add_eos_token,
    }
    for key, value in metadata.items():
        setter = setters.get(key)
        if setter is None:
            raise UsageError(f"add_to_gguf_writer does not know the key {key!r}")
        setter(value)
