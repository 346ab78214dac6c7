"""Tokenizers from tokenizer.json and from GGUF keys give transformers' ids, in both styles."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import BPE
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from audiocpp.engine.errors import ModelError, UsageError
from audiocpp.engine.tokenizer import (
    CONTROL,
    NORMAL,
    UNUSED,
    add_to_gguf_writer,
    gguf_tokenizer_metadata,
    load_tokenizer,
    merge_pairs,
    split_merge,
    tokenizer_from_gguf,
)
from audiocpp.engine.weights.gguf_file import GGUFFile

from .tokenizer_builders import (
    AUDIO_SPECIALS,
    CORPUS,
    OMNIVOICE_SPECIALS,
    QWEN_PLAIN_ADDED,
    QWEN_SPECIALS,
    build_llama,
    build_qwen2,
)

STYLES = ("qwen2", "llama_bpe")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tok")
    return {"qwen2": build_qwen2(root / "qwen2"), "llama_bpe": build_llama(root / "llama", vocab_size=700)}


def load_tokenizer_json(folder: Path) -> dict:
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))


def reference(folder: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))


def ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def gguf_round_trip(meta: dict, path: Path) -> dict:
    """Write the keys with gguf-py, read them back with the engine's GGUF parser."""
    writer = gguf.GGUFWriter(str(path), "tokenizer-test")
    add_to_gguf_writer(writer, meta)
    writer.add_tensor("dummy", np.zeros(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return GGUFFile(path).metadata


@pytest.mark.parametrize("style", STYLES)
def test_load_tokenizer_matches_transformers(style: str, folders: dict[str, Path]) -> None:
    folder = folders[style]
    ref = reference(folder)
    for tok in (load_tokenizer(folder), load_tokenizer(folder / "tokenizer.json")):
        for text in CORPUS:
            assert ids(tok, text) == ref.encode(text, add_special_tokens=False), text
        assert tok.encode("hi", add_special_tokens=True).ids == ref.encode("hi")  # the file's post-processor


@pytest.mark.parametrize("style", STYLES)
def test_gguf_round_trip_matches_transformers(style: str, folders: dict[str, Path], tmp_path: Path) -> None:
    folder = folders[style]
    ref = reference(folder)
    meta = gguf_round_trip(gguf_tokenizer_metadata(folder, style), tmp_path / "tok.gguf")
    rebuilt = tokenizer_from_gguf(meta, style)
    for text in CORPUS:
        want = ref.encode(text, add_special_tokens=False)
        assert ids(rebuilt, text) == want, (text, ref.convert_ids_to_tokens(want))
        assert rebuilt.decode(want, skip_special_tokens=False) == ref.decode(want, skip_special_tokens=False)
        if style == "llama_bpe":  # qwen2 GGUFs carry no token types: which added tokens are special is lost
            assert (rebuilt.decode(want, skip_special_tokens=True)
                    == ref.decode(want, skip_special_tokens=True))


@pytest.mark.parametrize("style", STYLES)
def test_gguf_merges_as_strings_or_pairs(style: str, folders: dict[str, Path], tmp_path: Path) -> None:
    """Issue #18: VoxCPM.cpp copies tokenizer.json's merges through; tokenizers >= 0.20 saves them
    as ["a", "b"] pairs, which gguf-py writes as an array of string arrays. Both forms, written
    to a real GGUF, give the file's ids."""
    folder = folders[style]
    assert isinstance(load_tokenizer_json(folder)["model"]["merges"][0], list)  # the saved form
    ref = reference(folder)
    size = load_tokenizer(folder).get_vocab_size(with_added_tokens=True)
    read = {}
    for form in ("strings", "pairs"):
        meta = gguf_tokenizer_metadata(folder, style, merges=form, vocab_size=size)
        read[form] = gguf_round_trip(meta, tmp_path / f"{form}.gguf")
        merges = read[form]["tokenizer.ggml.merges"]
        assert all(isinstance(m, str) for m in merges) if form == "strings" else \
            all(isinstance(m, list) and len(m) == 2 for m in merges)
        rebuilt = tokenizer_from_gguf(read[form], style)
        for text in CORPUS:
            assert ids(rebuilt, text) == ref.encode(text, add_special_tokens=False), (form, text)
    assert merge_pairs(read["strings"]) == merge_pairs(read["pairs"])


def test_merge_entries_must_be_strings_or_pairs() -> None:
    assert merge_pairs({"tokenizer.ggml.merges": ["a b", ["a b", "c"]]}) == [("a", "b"), ("a b", "c")]
    for bad in (["a", "b", "c"], ["a"], [1, 2], 3):
        with pytest.raises(ModelError, match="neither"):
            merge_pairs({"tokenizer.ggml.merges": [bad]})
    with pytest.raises(ModelError, match="not two tokens"):
        merge_pairs({"tokenizer.ggml.merges": ["ab"]})
    with pytest.raises(ModelError, match="not an array"):
        merge_pairs({"tokenizer.ggml.merges": "a b"})
    with pytest.raises(UsageError, match="merge encoding"):
        gguf_tokenizer_metadata(Tokenizer(BPE()), "qwen2", merges="tuples")


def test_qwen2_round_trip_with_named_specials(folders: dict[str, Path], tmp_path: Path) -> None:
    """omnivoice.cpp registers its specials by name: the named ones are special, the other
    added tokens are still matched whole."""
    folder = folders["qwen2"]
    ref = reference(folder)
    meta = gguf_round_trip(gguf_tokenizer_metadata(folder, "qwen2"), tmp_path / "tok.gguf")
    named = [*OMNIVOICE_SPECIALS, "<|endoftext|>"]
    rebuilt = tokenizer_from_gguf(meta, "qwen2", special_tokens=named)
    for text in CORPUS:
        assert ids(rebuilt, text) == ref.encode(text, add_special_tokens=False), text
    added = rebuilt.get_added_tokens_decoder()
    by_name = {t.content: t for t in added.values()}
    assert set(by_name) == {*QWEN_SPECIALS, *QWEN_PLAIN_ADDED, *OMNIVOICE_SPECIALS}
    assert by_name["<|text_start|>"].special and not by_name["<|im_start|>"].special
    with pytest.raises(ModelError, match="<|nope|>"):
        tokenizer_from_gguf(meta, "qwen2", special_tokens=["<|nope|>"])


def test_qwen2_keys_as_omnivoice_cpp_writes_them(folders: dict[str, Path]) -> None:
    tok = load_tokenizer(folders["qwen2"])
    meta = gguf_tokenizer_metadata(tok, "qwen2")
    assert set(meta) == {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"}
    assert meta["tokenizer.ggml.model"] == "gpt2"
    tokens = meta["tokenizer.ggml.tokens"]
    vocab = tok.get_vocab(with_added_tokens=True)
    assert len(tokens) == max(vocab.values()) + 1
    assert all(tokens[i] == t for t, i in vocab.items())
    assert all(" " not in m[1:] or m.count(" ") == 1 for m in meta["tokenizer.ggml.merges"])
    assert meta["tokenizer.ggml.tokens"][vocab["<|text_end|>"]] == "<|text_end|>"


def test_qwen2_gaps_are_empty_strings(tmp_path: Path, folders: dict[str, Path]) -> None:
    meta = gguf_tokenizer_metadata(folders["qwen2"], "qwen2")
    tokens = list(meta["tokenizer.ggml.tokens"])
    last = len(tokens) - 1
    tokens += ["", "", tokens[last]]  # move the last added token up, leaving two gaps
    tokens[last] = ""
    moved = {**meta, "tokenizer.ggml.tokens": tokens}
    rebuilt = tokenizer_from_gguf(gguf_round_trip(moved, tmp_path / "gap.gguf"), "qwen2")
    assert rebuilt.token_to_id(OMNIVOICE_SPECIALS[-1]) == len(tokens) - 1
    assert rebuilt.id_to_token(last) is None


def test_llama_keys_as_voxcpm_cpp_writes_them(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = folders["llama_bpe"]
    tok = load_tokenizer(folder)
    size = tok.get_vocab_size(with_added_tokens=True)
    meta = gguf_tokenizer_metadata(folder, "llama_bpe", vocab_size=size + 5)
    assert meta["tokenizer.ggml.pre"] == "default"
    assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"],
            meta["tokenizer.ggml.unknown_token_id"]) == (1, 2, 0)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == size + 5
    assert tokens[size:] == [f"[PAD{i}]" for i in range(size, size + 5)] and set(types[size:]) == {UNUSED}
    control = {tokens[i] for i, t in enumerate(types) if t == CONTROL}
    assert control == {"<unk>", "<s>", "</s>", *AUDIO_SPECIALS}
    assert types[tokens.index("<0x41>")] == NORMAL and tokens.index("<|audio_start|>") == 101
    read = gguf_round_trip(meta, tmp_path / "pad.gguf")
    assert read["tokenizer.ggml.token_type"].dtype == np.int32
    rebuilt = tokenizer_from_gguf(read, "llama_bpe")
    ref = reference(folder)
    for text in CORPUS:
        assert ids(rebuilt, text) == ref.encode(text, add_special_tokens=False), text
    assert rebuilt.token_to_id("[PAD3]") is None and rebuilt.token_to_id("[PAD" + str(size) + "]") is None


def test_llama_bos_eos_flags(folders: dict[str, Path], tmp_path: Path) -> None:
    meta = gguf_tokenizer_metadata(folders["llama_bpe"], "llama_bpe")
    plain = tokenizer_from_gguf(meta, "llama_bpe")
    assert plain.encode("Hello world.").ids == ids(plain, "Hello world.")  # VoxCPM.cpp writes no flags
    flagged = tokenizer_from_gguf({**meta, "tokenizer.ggml.add_bos_token": True,
                                   "tokenizer.ggml.add_eos_token": True}, "llama_bpe")
    body = ids(plain, "Hello world.")
    assert flagged.encode("Hello world.").ids == [1, *body, 2]
    assert (flagged.encode("Hello world.").ids[1:]
            == reference(folders["llama_bpe"]).encode("Hello world.")[1:] + [2])


def test_qwen2_class_of_transformers_agrees(folders: dict[str, Path]) -> None:
    """AutoTokenizer rebuilds Qwen2Tokenizer's pipeline from the vocab and merges (transformers 5);
    it agrees with the file. (Its Llama class does not keep the legacy normalizer and differs
    on leading spaces, so the Llama style is checked against the file only.)"""
    auto = AutoTokenizer.from_pretrained(str(folders["qwen2"]))
    tok = load_tokenizer(folders["qwen2"])
    for text in CORPUS:
        assert auto.encode(text, add_special_tokens=False) == ids(tok, text), text


def test_split_merge() -> None:
    assert split_merge("Ġ t") == ("Ġ", "t")
    assert split_merge("  a") == (" ", "a")  # a token that starts with a space
    with pytest.raises(ModelError):
        split_merge("ab")


def test_errors(tmp_path: Path, folders: dict[str, Path]) -> None:
    with pytest.raises(ModelError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(ModelError, match="does not exist"):
        load_tokenizer(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="not a valid tokenizer.json"):
        load_tokenizer(bad)
    meta = gguf_tokenizer_metadata(folders["qwen2"], "qwen2")
    with pytest.raises(UsageError, match="style"):
        tokenizer_from_gguf(meta, "sentencepiece")
    with pytest.raises(ModelError, match="'llama'"):
        tokenizer_from_gguf({**meta, "tokenizer.ggml.model": "llama"}, "qwen2")
    with pytest.raises(ModelError, match="merges"):
        tokenizer_from_gguf({k: v for k, v in meta.items() if k != "tokenizer.ggml.merges"}, "qwen2")
    with pytest.raises(UsageError, match="smaller"):
        gguf_tokenizer_metadata(folders["llama_bpe"], "llama_bpe", vocab_size=10)
